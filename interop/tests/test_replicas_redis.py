"""Three turnscope replicas sharing a real Redis (`--store redis://…`) behind HAProxy running the
recipe (examples/haproxy.cfg with the lines `turnscope replicas haproxy` prints): any replica
serves any handle, so a replica's death, a drain or a Redis restart loses no conversation.

The replicas run with `--auth-token` and a non-loopback `--allowed-host`, and HAProxy's health
checks pass (the recipe sends the token from HAProxy's environment). Clients: the Python `mcp`
SDK sessionless (with cookies) and in an MCP session, and a raw sessionless client keeping no
cookies (as Claude Code); each keeps its handle and checks its history on every turn
(shared_store.py). And the real Claude Code CLI, its handle's replica killed between two chats.

interop/run installs HAProxy and Redis (apt-get) when they are missing; without them these tests
fail.
"""

import json
import signal
import subprocess
import time
import urllib.request

import anyio
import pytest

from test_claude_code import SEARCH, START, ClaudeCode, chat, chat_on  # also puts interop/servers on the path
from anthropic_stub import AnthropicStub  # noqa: E402 - after the line above
from replicas import (
    Balancer, RawMcp, Replica, binary, handle_of, no_cookie_client, pinned_to, raw_record, raw_text, record_of, text_of,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from shared_store import CLEAR, CONFIG, TOKEN, RedisServer, keeper, store_args

pytestmark = pytest.mark.anyio

MODES = ("auto", "legacy", "raw")


@pytest.fixture
def redis():
    server = RedisServer()
    yield server
    server.close()


# Slow turns (1.2 s): a drained replica still has turns to finish while the test reads its /healthz.
SLOW = "[model]\npace = 0.2\nwords = 6\n"


@pytest.fixture
def cluster(redis, request):
    """Three replicas on one Redis, and HAProxy in front with the replicas' token; a test marked
    `slow_first` gets a first replica with slow turns (`SLOW`)."""
    slow_first = request.node.get_closest_marker("slow_first") is not None
    replicas = []
    balancer = None
    try:
        for i in (1, 2, 3):
            config = SLOW if slow_first and i == 1 else CONFIG
            replicas.append(Replica(f"r{i}", config, drain_seconds=10, args=["--store", redis.url, *store_args()]))
        balancer = Balancer(replicas, token=TOKEN)
        yield replicas, balancer
    finally:
        if balancer:
            balancer.stop()
        for r in replicas:
            r.stop()


def keepers(url, n, turns):
    """`n` keepers whose first openings are pinned (`pinned_to`): the modes in runs of three,
    each run over r1, r2, r3, so every replica has clients of every mode whatever the timing."""
    return [keeper(url, i, turns, MODES[(i // 3) % 3], f"r{1 + i % 3}") for i in range(n)]


async def run_all(clients, then=None, within=120):
    with anyio.fail_after(within):
        async with anyio.create_task_group() as tg:
            for c in clients:
                tg.start_soon(c.run)
            if then:
                await then()


async def wait_for(clients, done):
    while sum(c.completed for c in clients) < done:
        await anyio.sleep(0.01)


def health(replica):
    status, body = replica.health(TOKEN)
    return status, json.loads(body)


def assert_whole(clients, turns):
    """Every client said all its lines, every reply and history was right, and no line ran
    twice unless the client said it again (`Keeper.twice`)."""
    assert [(c.number, c.wrong) for c in clients if c.wrong] == []
    assert all(c.completed == turns for c in clients), [c.completed for c in clients]
    assert [(c.number, c.twice) for c in clients if c.twice] == []


def assert_clear(clients):
    for c in clients:
        for _, text in c.errors:
            assert any(clear in text for clear in CLEAR), (c.number, text)


async def test_fifty_clients_a_replica_killed_and_restarted_lose_no_turn(cluster):
    replicas, balancer = cluster
    clients = keepers(balancer.url, 50, 20)
    victim = replicas[1]
    timeline = {}

    async def kill_then_restart():
        await wait_for(clients, 300)
        timeline["killed"] = time.monotonic()
        # A probe whose turn is surely in flight on the victim when it dies: started there, its
        # line sent through the balancer, the kill 100 ms later (its turn lasts 120 ms once it
        # starts; on a loaded machine it may not have started yet, and then there is no lost turn).
        async with no_cookie_client() as web:
            web.headers["Authorization"] = f"Bearer {TOKEN}"
            direct, routed = RawMcp(victim.url, web, "probe"), RawMcp(balancer.url, web, "probe-lb")
            handle = raw_record(await direct.call("start", {}), "turnscope/start")["handle"]
            async with anyio.create_task_group() as tg:
                async def probe():
                    try:
                        timeline["probe"] = await routed.call("chat", {"handle": handle, "line": "probe line"})
                    except Exception as e:  # noqa: BLE001 - the victim died in it: said again below
                        timeline["probe"] = repr(e)
                tg.start_soon(probe)
                await anyio.sleep(0.1)
                timeline["killed"] = time.monotonic()
                victim.proc.send_signal(signal.SIGKILL)
                victim.proc.wait()
            answer = timeline["probe"]
            if not isinstance(answer, dict) or answer.get("isError"):
                # The call failed with the victim: the same line again, elsewhere.
                answer = await routed.call("chat", {"handle": handle, "line": "probe line"})
            turn = raw_record(answer, "turnscope/turn")
            timeline["probe_turn"] = turn
            # Failover time (a figure, not a check): the kill to the probe's answer elsewhere.
            print(f"failover: {time.monotonic() - timeline['killed']:.2f} s from SIGKILL to the answer on another replica")
            again = raw_record(await routed.call("chat", {"handle": handle, "line": ""}), "turnscope/turn")
            timeline["probe_after"] = again
        await wait_for(clients, 600)
        await anyio.to_thread.run_sync(victim.restart)
        timeline["restarted"] = time.monotonic()

    await run_all(clients, kill_then_restart)
    # The balancer honoured every pinned opening.
    assert [(c.number, c.home, c.replica) for c in clients if c.replica != c.home] == []
    on_victim = [c for c in clients if c.replica == victim.id]
    # No line ran twice: a call HAProxy resent after the victim stored its turn and died before
    # answering carried the same X-Request-ID, and was answered from the stored turn.
    assert_whole(clients, 20)
    assert_clear(clients)
    others = [c for c in clients if c.replica != victim.id]
    assert {c.mode for c in on_victim} == set(MODES), [c.mode for c in on_victim]
    # The others never noticed.
    assert [(c.number, c.errors) for c in others if c.errors] == []
    # The victim's clients went on with their handles elsewhere; the turns it was running when
    # it died were reported to them, once each (checked per client by `judge`).
    assert any(c.errors for c in on_victim)
    # The probe's turn, in flight at the kill, was reported once with its line (HAProxy retried
    # the call elsewhere, or the probe said it again), then answered there; never twice.
    probe = timeline["probe_turn"]
    if probe.get("unread") is not None:  # its turn had started on the victim (not forced: timing)
        assert probe["unread"] == {"end_reason": "restarted", "line": "probe line", "reply": ""}, probe
    assert probe["reply"].startswith("You said: probe line") and probe["end_reason"] == "completed", probe
    assert timeline["probe_after"].get("unread") is None and not timeline["probe_after"].get("reply"), timeline
    # The clients' own turns in flight were reported too, once each (checked by `judge`).
    # The restarted replica serves again: the handles it issued came back to it.
    status, body = health(victim)
    assert status == 200 and body["status"] == "ok", body
    assert body["sessions"] > 0, body
    assert body["store"]["url"].startswith("redis://127.0.0.1:"), body


async def test_redis_restarted_mid_run_gives_a_clear_error_then_every_conversation_goes_on(cluster, redis):
    replicas, balancer = cluster
    clients = keepers(balancer.url, 50, 20)
    seen = {}
    pids = [r.proc.pid for r in replicas]

    async def restart_redis():
        await wait_for(clients, 300)
        await anyio.to_thread.run_sync(redis.stop)
        # Down long enough for the replicas' write retries to give up.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            status, body = await anyio.to_thread.run_sync(health, replicas[0])
            seen.setdefault("down", (status, body))
            if body["status"] == "degraded":
                seen["down"] = (status, body)
            await anyio.sleep(0.2)
        await anyio.to_thread.run_sync(redis.start)
        for _ in range(100):
            status, body = await anyio.to_thread.run_sync(health, replicas[0])
            if body["status"] == "ok":
                seen["up"] = (status, body)
                break
            await anyio.sleep(0.1)

    await run_all(clients, restart_redis, within=180)
    assert_whole(clients, 20)
    assert_clear(clients)
    # While Redis was away: /healthz said degraded (200, so the balancer keeps the replicas that
    # explain it), and callers were told, naming the store.
    status, body = seen["down"]
    assert status == 200 and body["status"] == "degraded", body
    assert "store redis://127.0.0.1:" in body["store"]["error"], body
    named = [text for c in clients for _, text in c.errors if f"store {redis.url}" in text]
    assert named, [c.errors for c in clients if c.errors]
    # Then it recovered on its own: the same processes, healthy again.
    assert "up" in seen, seen
    assert [r.proc.poll() for r in replicas] == [None, None, None]
    assert [r.proc.pid for r in replicas] == pids


@pytest.mark.slow_first
async def test_a_draining_replica_hands_its_conversations_over(cluster):
    replicas, balancer = cluster
    clients = keepers(balancer.url, 30, 30)
    drained = replicas[0]
    seen = {}

    async def drain():
        await wait_for(clients, 200)
        seen["health"] = await drained.drain(TOKEN)
        seen["exit"] = await anyio.to_thread.run_sync(drained.proc.wait, 30)

    await run_all(clients, drain)
    assert_whole(clients, 30)
    status, said = seen["health"]
    body = json.loads(said or "null")
    # 503 with a shared store: the balancer takes the replica out at once, its handles go on
    # elsewhere, nothing is refused.
    assert status == 503 and body["status"] == "draining", (status, body)
    assert seen["exit"] == 0
    on_drained = [c for c in clients if c.replica == drained.id]
    assert {c.mode for c in on_drained} == set(MODES)
    for c in clients:
        for _, text in c.errors:
            assert "is draining" not in text, text
            # Only a client in an MCP session hears of it: its session lived in that process.
            assert c.mode == "legacy" and c.replica == drained.id, (c.number, c.mode, text)
    assert_clear(clients)


async def test_a_request_resent_to_another_replica_is_answered_from_the_stored_turn(cluster):
    """What HAProxy's `retry-on empty-response` does when a replica stored a turn and died
    before answering, made deterministic: the same request (its X-Request-ID, its line) reaching
    another replica after the first answered. That replica answers from the stored turn, and
    the line does not run twice; another request id, or another line, runs."""
    replicas, balancer = cluster
    async with no_cookie_client() as web:
        web.headers["Authorization"] = f"Bearer {TOKEN}"
        first, second = RawMcp(replicas[0].url, web, "lb"), RawMcp(replicas[1].url, web, "lb")
        handle = raw_record(await first.call("start", {}), "turnscope/start")["handle"]
        said = raw_record(await first.call("chat", {"handle": handle, "line": "good morning"}), "turnscope/turn")
        web.headers["X-Request-ID"] = "lb-resent-1"
        ran = raw_record(await first.call("chat", {"handle": handle, "line": "resent line"}), "turnscope/turn")
        again = raw_record(await second.call("chat", {"handle": handle, "line": "resent line"}), "turnscope/turn")
        assert again == ran, (again, ran)
        assert ran["turn"] == said["turn"] + 1
        other = raw_record(await second.call("chat", {"handle": handle, "line": "another line"}), "turnscope/turn")
        del web.headers["X-Request-ID"]
        plain = raw_record(await second.call("chat", {"handle": handle, "line": "another line"}), "turnscope/turn")
    # Each a new turn on the one history: the resend ran nothing (its turn would be one more),
    # and the history holds each line that ran once: every line has two words and every reply
    # four, so each turn's prompt is longer than the one before by the same count (see
    # shared_store), which a second run of the resent line would break.
    assert (other["turn"], plain["turn"]) == (ran["turn"] + 1, ran["turn"] + 2), (other, plain)
    tokens = [t["usage"]["prompt_tokens"] for t in (said, ran, other, plain)]
    steps = [b - a for a, b in zip(tokens, tokens[1:])]
    assert steps[0] > 0 and steps == [steps[0]] * 3, tokens


async def test_a_client_in_an_mcp_session_chats_on_a_handle_born_on_another_replica(cluster):
    """An SDK client in an MCP session (2025-11-25, `legacy`) keeps one handle across sessions
    it opens on each replica in turn (a new process going on with a conversation, or a session
    opened while the handle's replica was down, which is up again). The replicas say their store
    is shared, so the recipe keeps each chat on its session's replica, which loads the
    conversation from Redis: every chat answered, the history whole, all three replicas serving
    it. Routed by the handle's tag alone, a chat went to the handle's replica, which does not
    know the session: 404 ("Session terminated") for two sessions in three."""
    replicas, balancer = cluster
    handle = None
    turns = []
    for home in ("r1", "r2", "r3", "r1", "r2", "r3"):
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"} | pinned_to(home))
        async with http, Client(
            streamable_http_client(balancer.url, http_client=http), mode="legacy", read_timeout_seconds=30
        ) as client:
            if handle is None:
                handle = handle_of(await client.call_tool("start", {}))
            reply = await client.call_tool("chat", {"handle": handle, "line": f"said on {home}"})
            assert not reply.is_error, (home, text_of(reply))
            turns.append(record_of(reply, "turnscope/turn"))
    assert [t["turn"] for t in turns] == [1, 2, 3, 4, 5, 6], turns
    said = [t["reply"] for t in turns]
    assert all(r.startswith(f"You said: said on {h}") for r, h in zip(said, ("r1", "r2", "r3") * 2)), said
    # The history is whole: every line and reply have as many words, so each turn's prompt is
    # longer than the one before by the same count (see shared_store).
    tokens = [t["usage"]["prompt_tokens"] for t in turns]
    steps = [b - a for a, b in zip(tokens, tokens[1:])]
    assert steps[0] > 0 and steps == [steps[0]] * 5, tokens
    # Each replica served it (and holds it open now).
    assert [health(r)[1]["sessions"] for r in replicas] == [1, 1, 1]


async def test_claude_code_chats_on_after_its_replica_is_killed(cluster):
    """The real Claude Code CLI through the recipe: a start and a chat, its replica killed, then
    (another `claude -p`, the same handle) a chat that another replica answers with the history."""
    replicas, balancer = cluster
    header = ["--header", f"Authorization: Bearer {TOKEN}"]
    stub = AnthropicStub([SEARCH, START, chat("echo good morning"), {"text": "Done."}]).start()
    claude = ClaudeCode(stub, balancer.url, add_args=header)
    try:
        out = await anyio.to_thread.run_sync(claude.ask, "Talk to the bot.")
        assert out["is_error"] is False, out
        handle = stub.latest_handle()
        first = stub.result_of(2)
        assert first and not first["is_error"] and first["text"].startswith("The echo tool says: good morning")
        owner = next(r for r in replicas if handle.endswith(owner_tag(r)))
        owner.proc.send_signal(signal.SIGKILL)
        owner.proc.wait()
        # A new conversation of the model: its steps count from 0 again.
        stub.script = [chat_on(handle, "what did I say?"), {"text": "Done."}]
        out = await anyio.to_thread.run_sync(claude.ask, "Ask the bot what you said.")
        assert out["is_error"] is False, out
        again = stub.result_of(0)
        assert again and not again["is_error"], again
        assert again["text"].startswith("Earlier you said: echo good morning"), again
    finally:
        claude.close()
        stub.stop()


def owner_tag(replica) -> str:
    status, body = health(replica)
    return body["replica"]["tag"]


def session_events(path):
    """The `session` events of an `--events` file."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines) if e.get("type") == "session"]


async def opened_on_stream(replica, handle_prefix, within=10):
    """The `session` event a replica's live `/events` stream gives for `handle_prefix` (what
    `turnscope attach` folds): the open sessions come first on connect."""
    with anyio.fail_after(within):
        async with no_cookie_client() as web:
            async with web.stream("GET", f"{replica.base}/events", timeout=None) as response:
                async for line in response.aiter_lines():
                    event = json.loads(line) if line.startswith("{") else {}
                    if event.get("type") == "session" and event.get("handle_prefix") == handle_prefix:
                        return event
    return None


async def test_two_replicas_without_a_balancer_mark_the_conversation_they_took_over(redis, tmp_path):
    """Two turnscope processes on one Redis, no balancer: a handle started on r1 and chatted on
    r2 goes on with its history whole, and r2 says it took the conversation over from r1 in its
    events (`--events` file and the live `/events` stream `turnscope attach` reads); back on r1,
    r1 says it took it back from r2. The handle's first conversation on r1 carries no mark."""
    events = {rid: tmp_path / f"{rid}.jsonl" for rid in ("r1", "r2")}
    whole = "[model]\npace = 0.01\n"  # replies not cut: the history shows in the reply
    r1 = Replica("r1", whole, 5, args=["--store", redis.url, "--events", str(events["r1"])])
    r2 = Replica("r2", whole, 5, args=["--store", redis.url, "--events", str(events["r2"])])
    try:
        async with no_cookie_client() as web:
            on_r1, on_r2 = RawMcp(r1.url, web, "two-replicas"), RawMcp(r2.url, web, "two-replicas")
            start = await on_r1.call("start", {})
            handle = raw_record(start, "turnscope/start")["handle"]
            first = await on_r1.call("chat", {"handle": handle, "line": "my name is Ada"})
            assert not first.get("isError"), first
            second = await on_r2.call("chat", {"handle": handle, "line": "what did I say"})
            assert not second.get("isError"), second
            assert raw_text(second).startswith("Earlier you said: my name is Ada"), second
            assert raw_record(second, "turnscope/turn")["turn"] == 2, second
            streamed = await opened_on_stream(r2, handle[:8])
            assert streamed and streamed.get("taken_from") == "r1", streamed
            third = await on_r1.call("chat", {"handle": handle, "line": "and then"})
            assert raw_record(third, "turnscope/turn")["turn"] == 3, third
    finally:
        r1.stop()
        r2.stop()
    opened_r2 = [e for e in session_events(events["r2"]) if e["closed"] is None]
    assert [e.get("taken_from") for e in opened_r2] == ["r1"], opened_r2
    assert all(e.get("restored") for e in opened_r2), opened_r2
    opened_r1 = [e for e in session_events(events["r1"]) if e["closed"] is None]
    assert [e.get("taken_from") for e in opened_r1] == [None, "r2"], opened_r1
    # `turnscope sessions` reads the Redis store too: the conversation, its three turns.
    listed = subprocess.run(
        [binary(), "sessions", "--store", redis.url, "list", "--json"], capture_output=True, text=True, timeout=30
    )
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(l) for l in listed.stdout.splitlines()]
    assert [(r["prefix"], r["turns"]) for r in rows] == [(handle[:8], 3)], rows
    exported = subprocess.run(
        [binary(), "sessions", "--store", redis.url, "export", handle[:8], "--output", "-"],
        capture_output=True, text=True, timeout=30,
    )
    assert exported.returncode == 0, exported.stderr
    assert "what did I say" in exported.stdout
