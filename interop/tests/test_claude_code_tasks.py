"""The real Claude Code, run interactively in tmux (claude_tmux.py), with a bot turn served as an
MCP task: Claude Code moves the call to the background at once, polls `tasks/get` at the
server's interval, its prompt stays free (a line typed meanwhile is answered while the task
still runs), and when the turn ends its model receives the bot's reply (checked in the
scripted Anthropic stub's request log).

The turn is 25 s (50 words 0.5 s apart), the grace period 2 s, and Claude Code's tool-call
timeout (MCP_TOOL_TIMEOUT) 10 s: a task outlives the call's timeout, as a 60 s turn would
outlive the 60 s defaults, in less than half the time. Everything is on loopback and on free
ports; Claude Code has its own HOME.
"""

import json
import os
import pathlib
import sys
import tempfile
import time

import pytest

from conftest import Running

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "servers"))

from anthropic_stub import AnthropicStub  # noqa: E402
from claude_tmux import InteractiveClaude  # noqa: E402

LINE = "Tell me about your opening hours, in detail please"
WORDS = 50
CONFIG = f"""[server]
task_after_seconds = 2
task_poll_seconds = 1
[model]
pace = 0.5
words = {WORDS}
[bot]
name = "Hours"
description = "answers questions about the shop's opening hours"
"""
MEANWHILE = "Four, while the bot is still answering."
SCRIPT = [
    {"tool": "ToolSearch", "input": {"query": "select:mcp__turnscope__start,mcp__turnscope__chat"}},
    {"tool": "mcp__turnscope__start", "input": {}},
    {"tool": "mcp__turnscope__chat", "input": lambda stub: {"handle": stub.latest_handle(), "line": LINE}},
    {"text": "The bot answers in the background."},
    {"text": MEANWHILE},
    {"text": "The bot's answer is in."},
]


def events_of(path: pathlib.Path, kind: str):
    return [e for e in (json.loads(l) for l in path.read_text().splitlines()) if e.get("type") == kind]


def mentions_reply(request: dict) -> bool:
    """Whether a Messages request carries the bot's whole reply anywhere in its conversation."""
    text = json.dumps(request["body"].get("messages", []))
    return f"You said: {LINE}" in text and "and that is all I have for now" in text


@pytest.fixture
def scene():
    folder = tempfile.TemporaryDirectory(prefix="claude-tasks-")
    events = pathlib.Path(folder.name) / "events.jsonl"
    turnscope = Running(["--headless", "--port", "0", "--events", str(events)], CONFIG)
    stub = AnthropicStub(SCRIPT).start()
    claude = None
    try:
        claude = InteractiveClaude(
            stub.url, turnscope.url, f"tasks-claude-{os.getpid()}", extra_env={"MCP_TOOL_TIMEOUT": "10000"}
        )
        yield claude, stub, events
    finally:
        if claude:
            claude.close()
        stub.stop()
        turnscope.stop()
        folder.cleanup()


def test_a_long_turn_runs_as_a_background_task_and_its_reply_reaches_the_model(scene):
    claude, stub, events = scene
    claude.type("Ask the Hours bot about the opening hours")
    # The chat call becomes a task after the 2 s grace period: Claude Code moves it to the
    # background, its model's turn ends, and the footer counts the task.
    screen = claude.wait_for(
        "the task in the background",
        lambda s: "1 MCP task" in s and "The bot answers in the background." in s,
        60,
    )
    created_at = time.time()
    # Its prompt is free: a line typed now is answered while the task still runs.
    claude.type("What is two plus two?")
    screen = claude.wait_for("the answer to the second line", lambda s: MEANWHILE in s, 30)
    answered_at = time.time()
    tasks = events_of(events, "task")
    assert not any(e["change"] == "ended" for e in tasks), "the task ended before the second line was answered"
    assert "1 MCP task" in screen, screen
    # When the turn ends, Claude Code says so and its model gets the reply.
    screen = claude.wait_for("the task completed", lambda s: "(turnscope/chat) completed" in s, 60)
    claude.wait_for("its model's answer", lambda s: "The bot's answer is in." in s, 30)

    tasks = events_of(events, "task")
    changes = [e["change"] for e in tasks]
    assert changes[0] == "created" and "ended" in changes and "collected" in changes, changes
    created = tasks[0]
    assert created["client"] == "claude-code"
    ended = next(e for e in tasks if e["change"] == "ended")
    collected = next(e for e in tasks if e["change"] == "collected")
    assert ended["end_reason"] == "completed", ended
    # Polled at the interval asked (1 s), all through the 25 s turn.
    polls = [e["at_us"] for e in tasks if e["change"] == "polled"]
    assert len(polls) >= 15, f"{len(polls)} polls"
    gaps = [(b - a) / 1e6 for a, b in zip(polls, polls[1:])]
    assert 0.8 < sorted(gaps)[len(gaps) // 2] < 2.0, gaps
    assert (collected["at_us"] - ended["at_us"]) / 1e6 < 2.5, "collected within a poll of its end"
    # Every poll named the task in Mcp-Name, as the extension requires (masked in the record).
    gets = [x for x in events_of(events, "mcp") if x.get("method") == "tasks/get"]
    assert gets and all(x["mcp_name"] == f"{created['task']}…" for x in gets), gets[:2]
    assert answered_at < ended["at_us"] / 1e6, "the second line was answered while the turn ran"
    assert created_at < ended["at_us"] / 1e6

    # What the model read: first Claude Code's own words about the background task (never the
    # bot's reply), then, once the task completed, the bot's whole reply.
    requests = stub.main_requests()
    first = stub.result_of(2)
    assert first is not None and f"You said: {LINE}" not in first["text"], first
    with_reply = [r for r in stub.requests if r["body"] and mentions_reply(r)]
    assert with_reply, "no model request carried the bot's reply"
    assert mentions_reply({"body": requests[-1]}), "the model's last request has the reply"
    last = json.dumps(requests[-1]["messages"])
    assert "turnscope/turn" not in last and "first_piece_ms" not in last, "the record stays out of the model's view"
