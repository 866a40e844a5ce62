"""Three turnscope replicas behind HAProxy (examples/haproxy.cfg) on loopback, every `chat`
routed by its handle: driven by the official Python `mcp` SDK (in an MCP session, and
sessionless with cookies) and by a raw sessionless 2026-07-28 client that keeps no cookies (as
Claude Code), and by the real Claude Code CLI with the Claude Code test's harness; a replica
killed mid-load, a replica drained mid-load, bodies longer than HAProxy's buffer.

interop/run installs HAProxy (apt-get) when it is missing; without it these tests fail.
"""

import contextlib
import signal
import time

import anyio
import pytest

from mcp import Client
from test_claude_code import SEARCH, START, ClaudeCode, chat  # also puts interop/servers on the path
from anthropic_stub import AnthropicStub  # noqa: E402 - after the line above
from replicas import (
    CLEAR, Balancer, Chatter, RawChatter, RawHttpError, RawMcp, Replica, TaskChatter, handle_of, no_cookie_client,
    raw_record, raw_text, record_of, text_of,
)

pytestmark = pytest.mark.anyio

# Fast turns: 6 words, 2 ms apart.
CONFIG = "[model]\npace = 0.002\nwords = 6\n"
# Slow turns (4 s): long enough that a drain's probes, on a loaded 2-core CI machine, all run
# while a turn held across the signal is still in flight (at 1.2 s they sometimes did not, and
# met a replica that had already drained and exited).
SLOW = "[model]\npace = 0.2\nwords = 20\n"
# Every chat of a client declaring the tasks extension a task at once, polled every 100 ms;
# turns of 10 words 100 ms apart (a second, several polls each).
TASKS = "[server]\ntask_after_seconds = 0\ntask_poll_seconds = 0.1\n[model]\npace = 0.1\nwords = 10\n"


@pytest.fixture
def cluster(request):
    """Three replicas and HAProxy; a test marked `slow_first` gets a first replica with slower
    turns (`SLOW`), so a drain has turns in flight to wait for."""
    slow_first = request.node.get_closest_marker("slow_first") is not None
    configs = [SLOW if slow_first and i == 1 else CONFIG for i in (1, 2, 3)]
    with running(configs) as both:
        yield both


@contextlib.contextmanager
def running(configs, **balancer_options):
    """A replica r1, r2, … per config text, and HAProxy in front of them (`Balancer` options)."""
    replicas = []
    balancer = None
    try:
        for i, config in enumerate(configs, 1):
            replicas.append(Replica(f"r{i}", config, drain_seconds=10))
        balancer = Balancer(replicas, **balancer_options)
        yield replicas, balancer
    finally:
        if balancer:
            balancer.stop()
        for r in replicas:
            r.stop()


MODES = ("auto", "legacy", "raw")


def modes(n):
    """A third of the clients each way: `auto`, the SDK sessionless (2026-07-28; it keeps
    HAProxy's cookie); `legacy`, the SDK in an MCP session (`initialize`; also sticky on
    Mcp-Session-Id); `raw`, sessionless keeping no cookies (routed by the handle alone)."""
    return [MODES[i % 3] for i in range(n)]


def chatter(url, number, turns, mode, home=None):
    return RawChatter(url, number, turns, home) if mode == "raw" else Chatter(url, number, turns, mode, home)


def homed(url, n, turns):
    """`n` clients whose first openings are pinned (`pinned_to`): the modes in runs of three,
    each run over r1, r2, r3, so every replica has clients of every mode whatever the timing."""
    return [chatter(url, i, turns, MODES[(i // 3) % 3], f"r{1 + i % 3}") for i in range(n)]


def assert_no_cookie_kept(chatters):
    """The raw clients were offered HAProxy's cookie and never sent it back."""
    raw = [c for c in chatters if c.mode == "raw"]
    assert raw and all(c.offered_cookies > 0 for c in raw), [c.offered_cookies for c in raw]
    assert sum(c.sent_cookies for c in raw) == 0


async def run_all(chatters, then=None, within=90):
    with anyio.fail_after(within):
        async with anyio.create_task_group() as tg:
            for c in chatters:
                tg.start_soon(c.run)
            if then:
                await then()


async def test_fifty_clients_twenty_turns_through_haproxy_lose_nothing(cluster):
    replicas, balancer = cluster
    chatters = [chatter(balancer.url, i, 20, mode) for i, mode in enumerate(modes(50))]
    await run_all(chatters)
    assert [c.errors for c in chatters if c.errors] == []
    assert [c.wrong for c in chatters if c.wrong] == []
    assert sum(c.completed for c in chatters) == 1000
    # Every client stayed on one replica, and the balancer used all three.
    assert all(len(c.replicas) == 1 for c in chatters)
    used = {c.replicas[0] for c in chatters}
    assert used == {"r1", "r2", "r3"}, used
    for mode in MODES:
        assert len({c.replicas[0] for c in chatters if c.mode == mode}) >= 2, mode
    assert_no_cookie_kept(chatters)


async def test_fifty_sessionless_clients_without_cookies_twenty_turns_none_refused_or_misrouted(cluster):
    replicas, balancer = cluster
    chatters = [RawChatter(balancer.url, i, 20) for i in range(50)]
    await run_all(chatters)
    assert [c.errors for c in chatters if c.errors] == []
    assert [c.wrong for c in chatters if c.wrong] == []
    assert sum(c.completed for c in chatters) == 1000
    assert all(len(c.replicas) == 1 for c in chatters)
    assert {c.replicas[0] for c in chatters} == {"r1", "r2", "r3"}
    assert_no_cookie_kept(chatters)


async def test_without_the_use_server_lines_sessionless_clients_are_refused(cluster):
    """The control: the same clients through the recipe minus its use-server lines land on
    a replica per request, and most of their lines are refused as another replica's."""
    replicas, balancer = cluster
    unrouted = Balancer(replicas, route_by_handle=False)
    try:
        async with no_cookie_client() as web:
            client = RawMcp(unrouted.url, web, "control")
            refused = 0
            for i in range(6):
                start = await client.call("start", {})
                handle = raw_record(start, "turnscope/start").get("handle") or raw_text(start)
                reply = await client.call("chat", {"handle": handle, "line": f"line {i}"})
                refused += bool(reply.get("isError")) and "belongs to another replica" in raw_text(reply)
        # Round robin over three replicas: start and chat meet on one replica 1 time in 3.
        assert refused >= 3, refused
    finally:
        unrouted.stop()


async def test_a_line_longer_than_the_balancers_buffer_reaches_its_replica_or_is_refused_clearly(cluster):
    replicas, balancer = cluster
    long_line = "word " * 30_000  # 150 kB: beyond HAProxy's 64 KiB buffer, within 4 MiB
    async with no_cookie_client() as web:
        client = RawMcp(balancer.url, web, "long")
        for _ in range(3):
            start = await client.call("start", {})
            handle = raw_record(start, "turnscope/start")["handle"]
            # The handle before the line (the schema's order): read from the buffered part.
            reply = await client.call("chat", {"handle": handle, "line": long_line})
            assert not reply.get("isError"), raw_text(reply)[:300]
            assert raw_record(reply, "turnscope/turn")["end_reason"] == "completed"
        # The handle after the line: the balancer cannot read it and says so (413).
        with pytest.raises(RawHttpError) as refused:
            await client.call("chat", {"line": long_line, "handle": handle})
        assert refused.value.status == 413
        assert "longer than the load balancer's buffer" in refused.value.text
        assert "Send the handle before the line" in refused.value.text
        # A short line in that order is read whole and routed.
        reply = await client.call("chat", {"line": "short", "handle": handle})
        assert not reply.get("isError"), raw_text(reply)
        # A client mirroring the handle in Mcp-Param-Handle (chat's x-mcp-header; Claude Code
        # and the Python SDK do) is routed by the header, whatever the order.
        mirroring = RawMcp(balancer.url, web, "long-mirroring", mirror=True)
        for _ in range(3):
            start = await mirroring.call("start", {})
            handle = raw_record(start, "turnscope/start")["handle"]
            reply = await mirroring.call("chat", {"line": long_line, "handle": handle})
            assert not reply.get("isError"), raw_text(reply)[:300]
            assert raw_record(reply, "turnscope/turn")["end_reason"] == "completed"


async def test_a_killed_replica_gives_its_clients_clear_errors_and_no_one_else_any(cluster):
    replicas, balancer = cluster
    chatters = homed(balancer.url, 30, 40)
    victim = replicas[1]
    killed_at = []

    async def kill_mid_load():
        while sum(c.completed for c in chatters) < 200:
            await anyio.sleep(0.01)
        killed_at.append(time.monotonic())
        victim.proc.send_signal(signal.SIGKILL)

    await run_all(chatters, kill_mid_load)
    killed = killed_at[0]
    # The balancer honoured every pinned opening.
    assert [(c.number, c.home, c.replicas[0]) for c in chatters if c.replicas[0] != c.home] == []
    on_victim = [c for c in chatters if c.replicas[0] == victim.id]
    others = [c for c in chatters if c.replicas[0] != victim.id]
    assert on_victim and others
    for c in others:
        assert c.errors == [] and c.replicas == [c.replicas[0]], (c.number, c.errors)
    for c in on_victim:
        assert c.errors, f"client {c.number} on the killed replica saw no error"
        first_at, where, text = c.errors[0]
        assert first_at - killed <= 2.0, (c.number, first_at - killed, text)
        assert any(clear in text for clear in CLEAR), text
        # It started again elsewhere and finished its turns there.
        assert c.replicas[-1] != victim.id
    assert [c.wrong for c in chatters if c.wrong] == []
    assert all(c.completed == 40 for c in chatters)
    assert {c.mode for c in on_victim} == set(MODES), [c.mode for c in on_victim]


@pytest.mark.slow_first
async def test_a_drained_replica_loses_no_turn(cluster):
    replicas, balancer = cluster
    chatters = homed(balancer.url, 24, 30)
    drained = replicas[0]
    seen = {}

    async def drain_mid_load():
        while sum(c.completed for c in chatters) < 150:
            await anyio.sleep(0.01)
        # A turn held in flight on the drained replica across the SIGTERM (`SLOW`; the signal
        # goes once its first word arrived). Every client the probes use is connected before it.
        async with Client(drained.url) as held, Client(drained.url) as direct, no_cookie_client() as web:
            handle = handle_of(await held.call_tool("start", {}))
            # Another handle of the drained replica, for a sessionless client without cookies.
            raw_start = await RawMcp(drained.url, web, "drain-probe").call("start", {})
            raw_handle = raw_record(raw_start, "turnscope/start")["handle"]
            first_word = anyio.Event()

            async def on_progress(progress, total, message):
                first_word.set()

            async def say():
                seen["held"] = await held.call_tool(
                    "chat", {"handle": handle, "line": "held across the drain"}, progress_callback=on_progress
                )
                seen["held_at"] = time.monotonic()

            async with anyio.create_task_group() as tg:
                tg.start_soon(say)
                await first_word.wait()
                # /healthz says draining at once (404: HAProxy's soft stop), and start is refused.
                seen["health"] = await drained.drain()
                # Through the balancer, that handle still reaches its draining replica (which
                # refuses the new line as draining, not as another replica's).
                seen["routed"] = await RawMcp(balancer.url, web, "drain-probe").call(
                    "chat", {"handle": raw_handle, "line": "after the signal"}
                )
                seen["start"] = await direct.call_tool("start", {})
                seen["probed"] = time.monotonic()

    await run_all(chatters, drain_mid_load)
    # The probes below saw the drain in progress, not a replica gone.
    assert seen["probed"] < seen["held_at"], seen["held_at"] - seen["probed"]
    status, body = seen["health"]
    assert status == 404 and '"status":"draining"' in body, (status, body)
    held = seen["held"]
    said = record_of(held, "turnscope/turn").get("reply") or text_of(held)
    assert not held.is_error and said.startswith("You said: held across the drain"), said
    assert record_of(held, "turnscope/turn")["end_reason"] == "completed"
    refused = seen["start"]
    assert refused.is_error and "replica r1 is draining" in text_of(refused), text_of(refused)
    routed = seen["routed"]
    assert routed.get("isError") and "replica r1 is draining" in raw_text(routed), raw_text(routed)
    assert drained.proc.wait(timeout=20) == 0
    assert [c.wrong for c in chatters if c.wrong] == []
    assert all(c.completed == 30 for c in chatters)
    on_drained = [c for c in chatters if c.replicas[0] == drained.id]
    assert {c.mode for c in on_drained} == set(MODES), [c.mode for c in on_drained]
    for c in chatters:
        for _, where, text in c.errors:
            # Only the drained replica's clients were told anything, and it was clear.
            assert where == drained.id, (c.number, where, text)
            assert any(clear in text for clear in CLEAR), text


async def test_claude_code_through_haproxy_every_line_reaches_its_replica(cluster):
    """The real Claude Code CLI (2026-07-28, no MCP session, no cookies: each of its requests
    is balanced on its own) through the recipe, three times: every line answered on the
    replica that started its conversation, with the history of the lines before it."""
    replicas, balancer = cluster
    for _ in range(3):
        script = [SEARCH, START, chat("hello there"), chat("echo good morning"), chat("what did I say?"), {"text": "Done."}]
        stub = AnthropicStub(script).start()
        claude = ClaudeCode(stub, balancer.url)
        try:
            out = await anyio.to_thread.run_sync(claude.ask, "Talk to the bot.")
            assert out["is_error"] is False, out
            said = [stub.result_of(step) for step in (2, 3, 4)]
            assert all(r is not None and not r["is_error"] for r in said), said
            # (6 words a reply in this cluster: texts are cut or padded to that.)
            assert said[0]["text"].startswith("You said: hello there"), said[0]
            assert said[1]["text"].startswith("The echo tool says: good morning"), said[1]
            assert said[2]["text"].startswith("Earlier you said: echo good morning"), said[2]
        finally:
            claude.close()
            stub.stop()
    # The control: the recipe without its use-server lines refuses Claude Code's lines.
    unrouted = Balancer(replicas, route_by_handle=False)
    stub = AnthropicStub([SEARCH, START, chat("hello there"), chat("and again"), {"text": "Done."}]).start()
    claude = ClaudeCode(stub, unrouted.url)
    try:
        await anyio.to_thread.run_sync(claude.ask, "Talk to the bot.")
        said = [stub.result_of(step) for step in (2, 3)]
        assert any(r["is_error"] and "belongs to another replica" in r["text"] for r in said), said
    finally:
        claude.close()
        stub.stop()
        unrouted.stop()


@pytest.fixture
def task_cluster(request):
    """Three replicas making every chat of a tasks-declaring client a task, and HAProxy; a test
    marked `no_task_routing` gets the recipe without its Mcp-Name line (the control)."""
    route = request.node.get_closest_marker("no_task_routing") is None
    with running([TASKS] * 3, route_tasks=route) as both:
        yield both


async def test_tasks_are_polled_on_their_replica_routed_by_mcp_name(task_cluster):
    # 30 clients × 3 lines, each line a task polled through HAProxy until it completes: every
    # poll reaches the replica holding the task, whose id ends in its tag (as the handle does).
    replicas, balancer = task_cluster
    chatters = [TaskChatter(balancer.url, n, 3) for n in range(30)]
    await run_all(chatters)
    assert [c.wrong for c in chatters if c.wrong] == []
    assert [c.refused for c in chatters if c.refused] == []
    assert [c.misplaced for c in chatters if c.misplaced] == []
    assert sum(c.completed for c in chatters) == 90
    # Polls answered `working` reached the replica as the turn ran. How many depends on the
    # machine's load (a 1 s turn, polls 100 ms apart): 17 at a load of 15 on 2 cores, so only
    # their presence is asserted.
    assert sum(c.working for c in chatters) >= 1, "tasks were polled while their turns ran"


@pytest.mark.no_task_routing
async def test_without_the_mcp_name_line_polls_land_elsewhere_and_are_refused(task_cluster):
    # The control: the same clients through the recipe without its Mcp-Name line. Polls are
    # balanced round robin, so most reach a replica that never saw the task: -32602.
    replicas, balancer = task_cluster
    chatters = [TaskChatter(balancer.url, n, 1) for n in range(12)]
    await run_all(chatters, within=60)
    refused = [e for c in chatters for e in c.refused]
    assert len(refused) >= 4, f"{len(refused)} of 12 refused"
    assert all(e["code"] == -32602 and "no task has this id" in e["message"] for e in refused), refused


async def test_health_checks_pass_with_an_auth_token_and_a_non_loopback_allowed_host():
    """Replicas run with --auth-token and --allowed-host turnscope.internal: HAProxy given the
    token (TURNSCOPE_AUTH_TOKEN in its environment) marks them up and routes every chat; the
    control, HAProxy without the token, finds every replica down."""
    token = "interop-health-token"
    args = ["--auth-token", token, "--allowed-host", "turnscope.internal"]
    replicas = [Replica(f"r{i}", CONFIG, drain_seconds=1, args=args) for i in (1, 2, 3)]
    try:
        balancer = Balancer(replicas, token=token)
        try:
            async with no_cookie_client() as web:
                web.headers["Authorization"] = f"Bearer {token}"
                client = RawMcp(balancer.url, web, "token")
                seen = set()
                for i in range(6):
                    start = await client.call("start", {})
                    record = raw_record(start, "turnscope/start")
                    seen.add(record["replica"])
                    reply = await client.call("chat", {"handle": record["handle"], "line": f"line {i}"})
                    assert not reply.get("isError"), raw_text(reply)
                assert seen == {"r1", "r2", "r3"}, seen
        finally:
            balancer.stop()
        # The control: HAProxy without the token. Its checks get 401, so within a few checks
        # (500 ms apart, 2 to fall) every replica is down and it answers 503 itself.
        blind = Balancer(replicas, token=None, up_within=0)
        try:
            await anyio.sleep(2.5)
            async with no_cookie_client() as web:
                web.headers["Authorization"] = f"Bearer {token}"
                answer = await web.get(blind.url.replace("/mcp", "/healthz"))
            assert answer.status_code == 503, (answer.status_code, answer.text[:200])
        finally:
            blind.stop()
    finally:
        for r in replicas:
            r.stop()
