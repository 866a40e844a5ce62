"""The live event stream (`GET /events`) read by a client nobody here wrote (httpx, as any
viewer would): three viewers on one `--headless` turnscope under load from Python MCP SDK
clients see the same events, and a fourth that stops reading is dropped while the turns go on.
(`turnscope attach` itself, over a pipecat bot with whisker, runs in tests/it/console/attach.rs
with the interop suite's pipecat.)"""

import asyncio
import json
import socket
import threading
import time

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import Running

TOKEN = "interop-viewers"


def health(base):
    return httpx.get(f"{base}/healthz", headers={"Authorization": f"Bearer {TOKEN}"}).json()


class Viewer(threading.Thread):
    """Reads /events into (type, session, turn) keys of the events after it joined."""

    def __init__(self, base):
        super().__init__(daemon=True)
        self.base = base
        self.lines = []
        self.ended = False
        self.connected = threading.Event()

    def run(self):
        try:
            self.read()
        except httpx.RemoteProtocolError:
            pass  # the server stopped at the end of the test
        self.ended = True

    def read(self):
        with httpx.stream(
            "GET", f"{self.base}/events", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=None
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/x-ndjson"
            self.connected.set()
            for line in response.iter_lines():
                if line:
                    self.lines.append(json.loads(line))


async def load(url, sessions, turns):
    async def one(client_session):
        start = await client_session.call_tool("start", {})
        assert not start.is_error, start
        handle = start.meta["turnscope/start"]["handle"]
        for _ in range(turns):
            result = await client_session.call_tool("chat", {"handle": handle, "line": "use the clock"})
            assert not result.is_error, result

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with streamable_http_client(url, http_client=httpx.AsyncClient(headers=headers, timeout=60)) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await asyncio.gather(*(one(s) for _ in range(sessions)))


def test_three_viewers_see_the_same_events_and_a_stalled_one_is_dropped():
    # Each round opens ten sessions and the rounds go on until the stalled viewer is dropped,
    # which on a slow machine takes more rounds than the default cap of 32 sessions allows.
    running = Running(
        ["--headless", "--port", "0", "--auth-token", TOKEN, "--sessions", "1000"], "[model]\npace = 0.0\n"
    )
    try:
        base = running.url.rsplit("/mcp", 1)[0]
        assert health(base)["viewers"]["listening"] is False, "nobody watches yet: the bus stays free"
        viewers = [Viewer(base) for _ in range(3)]
        for v in viewers:
            v.start()
            assert v.connected.wait(10)
        # A viewer that reads its response head and then nothing, with a small receive window.
        host, port = base.removeprefix("http://").split(":")
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect((host, int(port)))
        stalled.sendall(
            f"GET /events HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        assert stalled.recv(64).startswith(b"HTTP/1.1 200")

        rounds = 0
        deadline = time.monotonic() + 90
        while health(base)["viewers"]["dropped"] == 0:
            assert time.monotonic() < deadline, "the stalled viewer was never dropped"
            asyncio.run(load(running.url, sessions=10, turns=10))
            rounds += 1
        ends = 10 * 10 * rounds
        deadline = time.monotonic() + 30
        keys = lambda v: [(e["session"], e["turn"]) for e in v.lines if e["type"] == "turn_ended"]
        while any(len(keys(v)) < ends for v in viewers):
            assert time.monotonic() < deadline, [len(keys(v)) for v in viewers]
            time.sleep(0.1)
        assert keys(viewers[0]) == keys(viewers[1]) == keys(viewers[2])
        assert len(set(keys(viewers[0]))) == ends
        tools = lambda v: sum(1 for e in v.lines if e["type"] == "tool_call" and e["name"] == "clock")
        assert tools(viewers[0]) == tools(viewers[1]) == tools(viewers[2]) == ends
        assert not any(v.ended for v in viewers), "the reading viewers were not dropped"
        # The stalled viewer's connection ends.
        stalled.settimeout(30)
        while stalled.recv(65536):
            pass
        stalled.close()
        assert health(base)["viewers"]["connected"] == 3
    finally:
        running.stop()
