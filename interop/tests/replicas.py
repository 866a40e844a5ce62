"""Replicas behind HAProxy on loopback, shared by the interop test (tests/test_replicas.py) and
the throughput figures (`interop/bench_replicas`): start N headless turnscope replicas on
free ports, HAProxy in front of them from examples/haproxy.cfg, and Python `mcp` SDK clients
that chat through it and start again elsewhere when told to.
"""

import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import anyio
from mcp import Client

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "haproxy.cfg"


def binary() -> str:
    path = os.environ.get("TURNSCOPE_BIN") or str(ROOT / "target" / "debug" / "turnscope")
    if not os.path.exists(path):
        raise RuntimeError(f"turnscope binary not found at {path}; run `cargo build` first or set TURNSCOPE_BIN")
    return path


def haproxy() -> str:
    found = shutil.which("haproxy") or (os.path.exists("/usr/sbin/haproxy") and "/usr/sbin/haproxy")
    if not found:
        raise RuntimeError(
            "haproxy is not installed; interop/run installs it (apt-get install -y haproxy), or install it by hand"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    """One `turnscope --headless` process, its id and its MCP URL (from the ready line)."""

    def __init__(self, rid: str, config_text: str, drain_seconds: float):
        self.id = rid
        self.dir = tempfile.TemporaryDirectory()
        config = pathlib.Path(self.dir.name) / "turnscope.toml"
        config.write_text(config_text)
        self.proc = subprocess.Popen(
            [binary(), "--headless", "--port", "0", "--replica-id", rid,
             "--drain-seconds", str(drain_seconds), "--sessions", "200", "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.ready_line = self.proc.stdout.readline()
        found = re.search(r"MCP (http://\S+/mcp)", self.ready_line)
        if not found or f"replica {rid} " not in self.ready_line:
            self.stop()
            raise RuntimeError(f"replica {rid} printed no MCP URL and replica id: {self.ready_line!r}")
        self.url = found.group(1)
        self.port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        self.base = self.url[: -len("/mcp")]

    def health(self):
        """(HTTP status, body) of its /healthz."""
        try:
            with urllib.request.urlopen(self.base + "/healthz", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.dir.cleanup()


class Balancer:
    """HAProxy running examples/haproxy.cfg with its frontend and servers moved to `replicas`."""

    def __init__(self, replicas):
        self.dir = tempfile.TemporaryDirectory()
        self.port = free_port()
        text = EXAMPLE.read_text()
        text = text.replace("bind 127.0.0.1:7880", f"bind 127.0.0.1:{self.port}")
        servers = "\n".join(
            f"    server {r.id} 127.0.0.1:{r.port} check cookie {r.id}" for r in replicas
        )
        text = re.sub(r"(    server r\d 127\.0\.0\.1:\d+ check cookie r\d\n?)+", servers + "\n", text)
        self.config = pathlib.Path(self.dir.name) / "haproxy.cfg"
        self.config.write_text(text)
        self.proc = subprocess.Popen(
            [haproxy(), "-db", "-f", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.wait_until_all_up(replicas)

    def wait_until_all_up(self, replicas):
        """Until /healthz through the balancer has answered from every replica."""
        want = {r.id for r in replicas}
        seen = set()
        for _ in range(400):
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited: {self.proc.stderr.read()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as r:
                    seen.add(re.search(r'"replica":\{"id":"([^"]+)"', r.read().decode()).group(1))
            except (OSError, AttributeError):
                pass
            if seen >= want:
                return
            time.sleep(0.05)
        raise RuntimeError(f"haproxy never reached every replica: saw {seen}, want {want}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.dir.cleanup()


def text_of(result) -> str:
    return "".join(b.text for b in result.content if getattr(b, "type", "") == "text")


# What a client is told when its replica is gone or going: the handle belongs elsewhere, the
# replica drains, its MCP session is unknown where it landed, or (the SDK's and httpx's own
# words) the connection or stream broke for good. Never a timeout.
CLEAR = (
    "Server disconnected",
    "belongs to another replica",
    "is draining",
    "Session terminated",
    "Server returned an error response",
    "reconnection attempts were exhausted",
    "SSE stream ended",
    "Not Found",
)


def root_errors(e: BaseException):
    """The leaf exceptions of an exception group (the SDK raises from task groups)."""
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            yield from root_errors(inner)
    else:
        yield e


class Chatter:
    """One MCP client saying `turns` lines in order through `url`; when a call fails (its
    replica died or drains) it notes the error and its time, reconnects, calls `start`
    again and says the same line again. Every line must come back as a completed turn that
    echoes it."""

    def __init__(self, url: str, number: int, turns: int, mode: str):
        self.url, self.number, self.turns, self.mode = url, number, turns, mode
        self.completed = 0
        self.replicas = []  # the replica of each start, in order
        self.errors = []  # (monotonic time, replica at the time, text)
        self.wrong = []  # replies that were not this client's line, or not completed

    def note(self, text: str):
        self.errors.append((time.monotonic(), self.replicas[-1] if self.replicas else None, text))

    async def run(self, pace_between: float = 0.0):
        attempts = 0
        while self.completed < self.turns:
            attempts += 1
            if attempts > self.turns + 20:
                self.wrong.append("gave up: too many reconnections")
                return
            try:
                async with Client(self.url, mode=self.mode, read_timeout_seconds=30) as client:
                    start = await client.call_tool("start", {})
                    if start.is_error:
                        self.note(text_of(start))
                        await anyio.sleep(0.1)
                        continue
                    self.replicas.append(start.meta["turnscope/start"]["replica"])
                    handle = start.meta["turnscope/start"]["handle"]
                    while self.completed < self.turns:
                        line = f"client {self.number} line {self.completed}"
                        reply = await client.call_tool("chat", {"handle": handle, "line": line})
                        if reply.is_error:
                            self.note(text_of(reply))
                            break
                        if not text_of(reply).startswith(f"You said: {line}") or (
                            reply.meta["turnscope/turn"]["end_reason"] != "completed"
                        ):
                            self.wrong.append((line, text_of(reply), reply.meta["turnscope/turn"]["end_reason"]))
                        self.completed += 1
                        if pace_between:
                            await anyio.sleep(pace_between)
            except Exception as e:  # noqa: BLE001 - every failure is recorded and judged by the test
                for leaf in root_errors(e):
                    self.note(f"{type(leaf).__name__}: {leaf}")
                await anyio.sleep(0.05)
