"""The real Claude Code CLI (npm @anthropic-ai/claude-code, pinned in interop/package.json)
against the real turnscope binary, its model played by the project's scripted Anthropic
Messages API stub (interop/servers/anthropic_stub.py) on loopback.

Claude Code speaks MCP 2026-07-28 (no initialize; its name in each request's `_meta`) and
defers MCP tools behind its ToolSearch tool, so each script first loads `start` and `chat`
with ToolSearch, as its model would. Every test asserts what the stub's model received in
each `tool_result`: the text turnscope meant for a model, and nothing of the machine-readable
record (`_meta`), the timings or the server's address. Each test has its own HOME and
CLAUDE_CONFIG_DIR; nothing leaves loopback.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import Running

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "servers"))

from anthropic_stub import AnthropicStub  # noqa: E402
from claude_tmux import claude_env  # noqa: E402
from faulty_openai import FaultyModel  # noqa: E402

CLAUDE = HERE.parent / "node_modules" / ".bin" / "claude"
TOOLS = "ToolSearch mcp__turnscope__start mcp__turnscope__chat"
SEARCH = {"tool": "ToolSearch", "input": {"query": "select:mcp__turnscope__start,mcp__turnscope__chat"}}
START = {"tool": "mcp__turnscope__start", "input": {}}
# What never belongs in text for a model: the record's keys, timing figures, the address.
LEAKS = ["turnscope/turn", "turnscope/start", "end_reason", "first_piece_ms", "total_ms", "replica", "127.0.0.1", "{"]


def chat(line):
    """A chat step on the handle the latest start gave the model."""
    return {"tool": "mcp__turnscope__chat", "input": lambda stub: {"handle": stub.latest_handle(), "line": line}}


def chat_on(handle, line):
    return {"tool": "mcp__turnscope__chat", "input": {"handle": handle, "line": line}}


class ClaudeCode:
    """Claude Code in a private HOME, its model at `stub`, turnscope added at `url`."""

    def __init__(self, stub, url, extra_env=None, add_args=()):
        self.dir = tempfile.TemporaryDirectory(prefix="claude-home-")
        self.home = pathlib.Path(self.dir.name)
        if not CLAUDE.exists():
            pytest.fail(f"Claude Code not found at {CLAUDE}; run interop/run (it installs interop/package.json)")
        self.env = claude_env(self.home, stub.url, extra_env)
        added = self.run("mcp", "add", "--transport", "http", "turnscope", url, *add_args)
        assert added.returncode == 0, added.stderr

    def run(self, *args, timeout=120):
        return subprocess.run(
            [str(CLAUDE), *args], env=self.env, cwd=self.home, capture_output=True, text=True, timeout=timeout
        )

    def ask(self, prompt, timeout=120):
        """`claude -p PROMPT` headless; its JSON result."""
        done = self.run("-p", prompt, "--output-format", "json", "--allowedTools", TOOLS, timeout=timeout)
        assert done.returncode == 0, f"claude -p failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
        return json.loads(done.stdout)

    def close(self):
        self.dir.cleanup()


class Scene:
    """turnscope (headless, events recorded) + the stub + Claude Code."""

    def __init__(self, script, config="[model]\npace = 0.005\n", extra_env=None):
        self.events_dir = tempfile.TemporaryDirectory(prefix="claude-events-")
        self.events = pathlib.Path(self.events_dir.name) / "events.jsonl"
        self.turnscope = Running(["--headless", "--port", "0", "--events", str(self.events)], config)
        self.stub = AnthropicStub(script).start()
        self.claude = ClaudeCode(self.stub, self.turnscope.url, extra_env)

    def result(self, step):
        got = self.stub.result_of(step)
        assert got is not None, f"no tool_result for step {step}: {self.stub.tool_results()}"
        return got

    def close(self):
        self.claude.close()
        self.stub.stop()
        self.turnscope.stop()
        self.events_dir.cleanup()


@pytest.fixture
def scenes():
    made = []

    def make(*args, **kwargs):
        scene = Scene(*args, **kwargs)
        made.append(scene)
        return scene

    yield make
    for scene in made:
        scene.close()


def assert_model_text(result, expected=None):
    """The tool_result is exactly text (one block, or a string), with no record in it."""
    raw = result["raw"]
    content = raw.get("content")
    if isinstance(content, list):
        assert all(b.get("type") == "text" for b in content), raw
    for leak in LEAKS:
        assert leak not in result["text"], f"{leak!r} reached the model: {result['text']!r}"
    assert "_meta" not in json.dumps(raw), raw
    if expected is not None:
        assert result["text"] == expected


def test_mcp_add_then_list_shows_connected(scenes):
    scene = scenes([])
    listed = scene.claude.run("mcp", "list", timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"turnscope: http://127\.0\.0\.1:\d+/mcp \(HTTP\) - . Connected", listed.stdout), listed.stdout


def test_start_chat_tool_turn_history_and_bad_handles(scenes):
    scene = scenes(
        [
            SEARCH,
            START,
            chat("hello there"),
            chat("echo good morning"),
            chat("what did I say?"),
            chat_on("00000000-0000-4000-8000-000000000000", "anyone there?"),
            chat_on("abc", "hi"),
            {"text": "The bot answered."},
        ],
        config='[model]\npace = 0.005\n[bot]\nname = "Hours"\ndescription = "answers questions about opening hours"\ngreeting = "Hello, I am Hours."\n',
    )
    out = scene.claude.ask("Talk to the Hours bot.")
    assert out["is_error"] is False and out["result"] == "The bot answered.", out

    started = scene.result(1)
    assert not started["is_error"]
    handle = scene.stub.latest_handle()
    text = started["text"]
    assert text.startswith('Conversation started with the bot "Hours" (answers questions about opening hours).\n'), text
    assert f"Handle: {handle}\n" in text and text.endswith("The bot greets you: Hello, I am Hours."), text
    assert_model_text(started)

    assert_model_text(scene.result(2), "You said: hello there")
    assert not scene.result(2)["is_error"]
    assert_model_text(scene.result(3), "The echo tool says: good morning.")
    assert_model_text(scene.result(4), "Earlier you said: echo good morning")

    unknown = scene.result(5)
    assert unknown["is_error"]
    assert "no live session" in unknown["text"] and "Call start" in unknown["text"], unknown
    assert "another replica" not in unknown["text"] and "HAProxy" not in unknown["text"], unknown
    malformed = scene.result(6)
    assert malformed["is_error"] and "36 characters; received 3" in malformed["text"], malformed

    # The model found the tools with ToolSearch; their descriptions say how to use them.
    found = [b.get("tool_name") for b in scene.result(0)["raw"]["content"]]
    assert found == ["mcp__turnscope__start", "mcp__turnscope__chat"], found
    offered = {t["name"]: t["description"] for t in scene.stub.main_requests()[-1]["tools"]}
    assert "secret" in offered["mcp__turnscope__start"] and "Call start first" in offered["mcp__turnscope__start"]
    assert "empty line" in offered["mcp__turnscope__chat"] and '"Hours"' in offered["mcp__turnscope__chat"]
    # The server's instructions reached its system prompt.
    system = json.dumps(scene.stub.main_requests()[0])
    assert "MCP Server Instructions" in system and 'The bot \\"Hours\\" (answers questions about opening hours)' in system

    # turnscope's events name the client by what it sent.
    events = [json.loads(line) for line in scene.events.read_text().splitlines()]
    opened = [e for e in events if e.get("type") == "session" and e.get("opener")]
    assert opened and all(e["opener"] == {"mcp": "claude-code"} for e in opened), opened


def test_failed_turns_are_is_error_text_with_the_partial_reply(scenes):
    model = FaultyModel().start()
    try:
        scene = scenes(
            [SEARCH, START, chat("http 500 please"), chat("cut it short"), chat("still there?"), {"text": "Done."}],
            config=f'[model]\nurl = "{model.url}"\nname = "faulty"\n',
        )
        scene.claude.ask("Talk to the bot.")
        broken = scene.result(2)
        assert broken["is_error"], broken
        assert broken["text"].startswith("[The bot's turn failed before it said anything. It failed: "), broken
        assert "500" in broken["text"] and "The conversation still works" in broken["text"], broken
        cut = scene.result(3)
        assert cut["is_error"], cut
        assert cut["text"].startswith("We open\n\n[The bot's turn failed; the reply above is all it said."), cut
        # The conversation goes on after both.
        assert_model_text(scene.result(4), "You said: still there?")
    finally:
        model.stop()


def test_a_turn_longer_than_60_seconds_with_default_timeouts(scenes):
    # 62 words a second apart: about 62 s, beyond any 60 s default, each word a progress
    # notification that resets Claude Code's idle watchdog.
    scene = scenes([SEARCH, START, chat("take your time"), {"text": "Done."}], config="[model]\npace = 1.0\nwords = 62\n")
    began = time.monotonic()
    scene.claude.ask("Talk to the bot.", timeout=240)
    took = time.monotonic() - began
    long = scene.result(2)
    assert not long["is_error"], long
    assert long["text"].startswith("You said: take your time") and len(long["text"].split()) == 62, long
    assert_model_text(long)
    assert took > 60, took


def test_a_timed_out_call_is_read_back_with_an_empty_line(scenes):
    # MCP_TOOL_TIMEOUT cuts every call after 2 s; the turn (about 3 s) runs on in turnscope,
    # and the model's next call, an empty line, waits for it and reads its whole reply.
    scene = scenes(
        [SEARCH, START, chat("tell me a long story"), chat(""), {"text": "Done."}],
        config="[model]\npace = 0.3\nwords = 10\n",
        extra_env={"MCP_TOOL_TIMEOUT": "2000"},
    )
    scene.claude.ask("Talk to the bot.", timeout=120)
    timed_out = scene.result(2)
    assert timed_out["is_error"] and "timed out" in timed_out["text"], timed_out
    read = scene.result(3)
    assert not read["is_error"], read
    assert read["text"].startswith("You said: tell me a long story") and len(read["text"].split()) == 10, read
    assert_model_text(read)
    # Claude Code withdrew the timed-out call by closing its stream: a cancel, not an error.
    events = [json.loads(line) for line in scene.events.read_text().splitlines()]
    cancelled = [e for e in events if e.get("type") == "call_cancelled"]
    assert [e["client"] for e in cancelled] == ["claude-code"], cancelled
    chats = [e for e in events if e.get("type") == "served" and e.get("route") == "mcp tools/call chat"]
    assert chats and all(e["ok"] for e in chats), chats


def free_port():
    """A loopback port nothing listens on now (both runs of turnscope use it, as a person's
    restart on the same address does, so Claude Code's `mcp add` stays right)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_conversation_through_a_turnscope_restart():
    # Claude Code chats, turnscope stops (SIGTERM) and starts again on the same address and
    # store file, and a new Claude Code run chats on the same handle: its model reads an
    # answer that remembers the line from before the restart.
    with tempfile.TemporaryDirectory(prefix="claude-store-") as folder:
        store = f"sqlite:{pathlib.Path(folder) / 'sessions.sqlite3'}"
        args = ["--headless", "--port", str(free_port()), "--store", store]
        config = "[model]\npace = 0.005\n"
        first = Running(args, config)
        before = AnthropicStub([SEARCH, START, chat("my name is Ada"), {"text": "Done."}]).start()
        claude = ClaudeCode(before, first.url)
        try:
            out = claude.ask("Talk to the bot.")
            assert out["is_error"] is False, out
            handle = before.latest_handle()
            assert_model_text(before.result_of(2), "You said: my name is Ada")
        finally:
            before.stop()
            first.stop()

        second = Running(args, config)
        after = AnthropicStub([SEARCH, chat_on(handle, "what did I say"), {"text": "Done."}]).start()
        try:
            assert second.url == first.url, (first.url, second.url)
            claude.env = claude_env(claude.home, after.url, None)
            out = claude.ask("Go on talking to the bot.")
            assert out["is_error"] is False, out
            recalled = after.result_of(1)
            assert recalled is not None, after.tool_results()
            assert not recalled["is_error"], recalled
            assert_model_text(recalled, "Earlier you said: my name is Ada")
        finally:
            after.stop()
            second.stop()
            claude.close()
