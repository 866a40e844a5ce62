"""Three turnscope replicas behind HAProxy (examples/haproxy.cfg) on loopback, driven by the
official Python `mcp` SDK: sticky on the MCP session (and on HAProxy's cookie for sessionless
2026-07-28 clients), a replica killed mid-load, a replica drained mid-load.

interop/run installs HAProxy (apt-get) when it is missing; without it these tests fail.
"""

import signal
import time

import anyio
import pytest

from mcp import Client
from replicas import CLEAR, Balancer, Chatter, Replica, text_of

pytestmark = pytest.mark.anyio

# Fast turns: 6 words, 2 ms apart.
CONFIG = "[model]\npace = 0.002\nwords = 6\n"
SLOW = "[model]\npace = 0.2\nwords = 6\n"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def cluster(request):
    """Three replicas and HAProxy; a test marked `slow_first` gets a first replica with slower
    turns (1.2 s a turn), so a drain has turns in flight to wait for."""
    slow_first = request.node.get_closest_marker("slow_first") is not None
    configs = [SLOW if slow_first and i == 1 else CONFIG for i in (1, 2, 3)]
    replicas = []
    balancer = None
    try:
        for i, config in zip((1, 2, 3), configs):
            replicas.append(Replica(f"r{i}", config, drain_seconds=10))
        balancer = Balancer(replicas)
        yield replicas, balancer
    finally:
        if balancer:
            balancer.stop()
        for r in replicas:
            r.stop()


def modes(n):
    """Half the clients open an MCP session (`initialize`, sticky on Mcp-Session-Id), half
    speak the sessionless 2026-07-28 (sticky on HAProxy's cookie)."""
    return ["legacy" if i % 2 else "auto" for i in range(n)]


async def run_all(chatters, then=None, within=90):
    with anyio.fail_after(within):
        async with anyio.create_task_group() as tg:
            for c in chatters:
                tg.start_soon(c.run)
            if then:
                await then()


async def test_fifty_clients_twenty_turns_through_haproxy_lose_nothing(cluster):
    replicas, balancer = cluster
    chatters = [Chatter(balancer.url, i, 20, mode) for i, mode in enumerate(modes(50))]
    await run_all(chatters)
    assert [c.errors for c in chatters if c.errors] == []
    assert [c.wrong for c in chatters if c.wrong] == []
    assert sum(c.completed for c in chatters) == 1000
    # Every client stayed on one replica, and the balancer used all three.
    assert all(len(c.replicas) == 1 for c in chatters)
    used = {c.replicas[0] for c in chatters}
    assert used == {"r1", "r2", "r3"}, used
    for mode in ("legacy", "auto"):
        assert len({c.replicas[0] for c in chatters if c.mode == mode}) >= 2, mode


async def test_a_killed_replica_gives_its_clients_clear_errors_and_no_one_else_any(cluster):
    replicas, balancer = cluster
    chatters = [Chatter(balancer.url, i, 40, mode) for i, mode in enumerate(modes(30))]
    victim = replicas[1]
    killed_at = []

    async def kill_mid_load():
        while sum(c.completed for c in chatters) < 200:
            await anyio.sleep(0.01)
        killed_at.append(time.monotonic())
        victim.proc.send_signal(signal.SIGKILL)

    await run_all(chatters, kill_mid_load)
    killed = killed_at[0]
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


@pytest.mark.slow_first
async def test_a_drained_replica_loses_no_turn(cluster):
    replicas, balancer = cluster
    chatters = [Chatter(balancer.url, i, 30, mode) for i, mode in enumerate(modes(24))]
    drained = replicas[0]
    seen = {}

    async def drain_mid_load():
        while sum(c.completed for c in chatters) < 150:
            await anyio.sleep(0.01)
        # A turn held in flight on the drained replica across the SIGTERM (1.2 s long; the
        # signal goes once its first word arrived).
        async with Client(drained.url) as held:
            handle = (await held.call_tool("start", {})).meta["turnscope/start"]["handle"]
            first_word = anyio.Event()

            async def on_progress(progress, total, message):
                first_word.set()

            async def say():
                seen["held"] = await held.call_tool(
                    "chat", {"handle": handle, "line": "held across the drain"}, progress_callback=on_progress
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(say)
                await first_word.wait()
                drained.proc.send_signal(signal.SIGTERM)
                # /healthz says draining at once (404: HAProxy's soft stop), and start is refused.
                for _ in range(200):
                    status, body = await anyio.to_thread.run_sync(drained.health)
                    if status != 200:
                        break
                    await anyio.sleep(0.005)
                seen["health"] = (status, body)
                async with Client(drained.url) as direct:
                    seen["start"] = await direct.call_tool("start", {})

    await run_all(chatters, drain_mid_load)
    status, body = seen["health"]
    assert status == 404 and '"status":"draining"' in body, (status, body)
    held = seen["held"]
    assert not held.is_error and text_of(held).startswith("You said: held across the drain"), text_of(held)
    assert held.meta["turnscope/turn"]["end_reason"] == "completed"
    refused = seen["start"]
    assert refused.is_error and "replica r1 is draining" in text_of(refused), text_of(refused)
    assert drained.proc.wait(timeout=20) == 0
    assert [c.wrong for c in chatters if c.wrong] == []
    assert all(c.completed == 30 for c in chatters)
    on_drained = [c for c in chatters if c.replicas[0] == drained.id]
    assert on_drained
    for c in chatters:
        for _, where, text in c.errors:
            # Only the drained replica's clients were told anything, and it was clear.
            assert where == drained.id, (c.number, where, text)
            assert any(clear in text for clear in CLEAR), text
