"""Replicas sharing a Redis store, for tests/test_replicas_redis.py: a real `redis-server` on a
free loopback port (no config file: its few settings on the command line), and clients that keep
their handle through whatever happens to the replica or the store, checking their conversation's
history on every turn.

How a client checks its history: the embedded scripted model counts one prompt token per word
of everything it is sent, so with lines of 4 words ("client 7 line 12") and replies cut to 6,
a turn's `usage.prompt_tokens` grows by exactly 10 for every earlier turn the history holds.
Every reply a client read must be in the history it is sent next (nothing lost), and nothing
it did not send may be (a line is there at most twice: once more only when the client said it
again after a call that failed without telling whether it ran).
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import anyio
import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from replicas import (
    RawHttpError, RawMcp, free_port, pinned_to, handle_of, no_cookie_client, raw_record, raw_text, record_of, root_errors,
    text_of,
)

# Turns of a known size: 6-word replies, 20 ms a word (120 ms a turn, so a replica killed
# mid-load is killed in the middle of some turns).
CONFIG = "[model]\npace = 0.02\nwords = 6\n"
TOKEN = "interop-shared-store-token"
# A non-loopback name the replicas also accept (--allowed-host): the health checks must still pass.
ALLOWED_HOST = "turnscope.internal"


def redis_server() -> str:
    found = shutil.which("redis-server") or (os.path.exists("/usr/bin/redis-server") and "/usr/bin/redis-server")
    if not found:
        raise RuntimeError(
            "redis-server is not installed; interop/run installs it (apt-get install -y redis-server), "
            "or install it by hand"
        )
    return found


class RedisServer:
    """`redis-server` on a free loopback port with no config file, its data in a temporary folder,
    every write appended to its log before it answers (`appendonly yes`, `appendfsync always`), so a
    restart keeps everything."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory(prefix="turnscope-redis-")
        self.port = free_port()
        self.proc = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.proc = subprocess.Popen(
            [redis_server(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir.name,
             "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {self.port} never answered PING")

    def stop(self):
        """A clean stop (SIGTERM): Redis finishes its log and exits."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self):
        self.stop()
        self.dir.cleanup()


def store_args():
    """The flags every replica of these tests runs with, but for `--store`."""
    return ["--auth-token", TOKEN, "--allowed-host", ALLOWED_HOST]


# What a client may be told while its replica dies or drains, or its store is away: the SDK's
# and httpx's own words for a broken stream or connection, an MCP session its new replica does
# not know, HAProxy's 502/503, or turnscope's errors naming the store. Never a timeout, never
# "no live session" (the conversation is never gone).
CLEAR = (
    "Server disconnected",
    "peer closed connection without sending complete message body",
    "Session terminated",
    "Server returned an error response",
    "reconnection attempts were exhausted",
    "SSE stream ended",
    "Not Found",
    "HTTP 502",
    "HTTP 503",
    "HTTP 404",
    "store redis://",
)


class Keeper:
    """One client saying `turns` lines in order on one handle whatever happens: when a call fails
    it notes the error, waits a little, reconnects if its connection is gone, and goes on with the
    same handle: an error saying the reply is kept → an empty line reads it; otherwise the same
    line again. It checks every reply and every turn's history (see the module's doc). With
    `home`, its first opening goes to that replica (`pinned_to`)."""

    def __init__(self, url: str, number: int, turns: int, mode: str, token: str = TOKEN, home: str | None = None):
        self.url, self.number, self.turns, self.mode, self.token = url, number, turns, mode, token
        self.home = home
        self.completed = 0
        self.handle = None
        self.replica = None  # the replica that answered start
        self.errors = []  # (monotonic time, text)
        self.wrong = []  # what was not as it must be
        self.reported = []  # lines of turns reported lost in flight (`unread`, end_reason `restarted`)
        self.failed_lines = []  # lines whose call failed
        self.base = None  # prompt tokens of the first turn, less its line
        self.extra = 0  # lines the history holds twice (said again after a failure)
        # Lines the history holds twice with no failure seen: a line run twice without the
        # client saying it again (what the X-Request-ID HAProxy sets prevents when it resends
        # a call whose replica saved the turn and died before answering). Never allowed.
        self.twice = []
        self.reads = 0  # replies read with an empty line after a store error

    def note(self, text: str):
        self.errors.append((time.monotonic(), text))

    def line(self) -> str:
        return f"client {self.number} line {self.completed}"

    def judge(self, turn: dict, line: str):
        """Checks one answered turn of `line` and counts it."""
        said = turn.get("reply") or ""
        if not said.startswith(f"You said: {line}") or turn.get("end_reason") != "completed":
            self.wrong.append(("reply", line, said, turn.get("end_reason"), turn.get("error")))
        unread = turn.get("unread")
        if unread and unread.get("end_reason") == "restarted":
            lost = unread.get("line")
            # A lost turn is one whose call failed, or this very line: HAProxy retried the call
            # on another replica itself (`retry-on empty-response`) when its replica died in it.
            if lost in self.reported or (lost not in self.failed_lines and lost != line):
                self.wrong.append(("reported", lost, self.reported, self.failed_lines))
            self.reported.append(lost)
        elif unread:
            self.wrong.append(("unread", unread))
        prompt = (turn.get("usage") or {}).get("prompt_tokens")
        if prompt is None:
            self.wrong.append(("no usage", turn))
        else:
            if self.base is None:
                self.base = prompt - 4
            held = (prompt - self.base - 4) // 10  # earlier turns the history holds
            most = self.completed + len(self.failed_lines) + len(self.twice)
            if held == most + 1 and not self.twice:
                self.twice.append(line)
            elif held < self.completed or held > most:
                self.wrong.append(("history", line, held, self.completed, len(self.failed_lines)))
        self.completed += 1

    def after_error(self, text: str) -> str:
        """What to send next after an error: "" (read the kept reply) or the same line."""
        self.note(text)
        if "empty line" in text and "store" in text:
            return ""
        line = self.line()
        if line not in self.failed_lines:
            self.failed_lines.append(line)
        return line

    def answered(self, said: str, line: str, error: str | None, turn: dict | None) -> str | None:
        """Takes the answer to `said` (sent for `line`): the error's text, or the turn's record.
        Returns what to send next when not the next line: "" (read the kept reply) or the line
        again."""
        if error is not None:
            return self.after_error(error)
        if said == "" and not turn.get("reply"):
            # Nothing was kept after all: say the line again.
            return line
        self.reads += said == ""
        self.judge(turn, line)
        return None

    async def run(self):
        attempts = 0
        pending = None  # what to send next when not the next line
        while self.completed < self.turns:
            attempts += 1
            if attempts > 200:
                self.wrong.append("gave up: too many reconnections")
                return
            try:
                pin = pinned_to(self.home if attempts == 1 else None)
                http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.token}"} | pin)
                async with http, Client(
                    streamable_http_client(self.url, http_client=http), mode=self.mode, read_timeout_seconds=30
                ) as client:
                    if self.handle is None:
                        start = await client.call_tool("start", {})
                        if start.is_error:
                            self.note(text_of(start))
                            await anyio.sleep(0.1)
                            continue
                        self.replica = record_of(start, "turnscope/start")["replica"]
                        self.handle = handle_of(start)
                    while self.completed < self.turns:
                        line = self.line()
                        said = line if pending is None else pending
                        reply = await client.call_tool("chat", {"handle": self.handle, "line": said})
                        if reply.is_error:
                            pending = self.answered(said, line, text_of(reply), None)
                            await anyio.sleep(0.2)
                        else:
                            pending = self.answered(said, line, None, record_of(reply, "turnscope/turn"))
            except Exception as e:  # noqa: BLE001 - every failure is recorded and judged by the test
                for leaf in root_errors(e):
                    pending = self.after_error(f"{type(leaf).__name__}: {leaf}")
                await anyio.sleep(0.1)


class RawKeeper(Keeper):
    """A `Keeper` speaking through `RawMcp` (sessionless, no cookies, as Claude Code)."""

    def __init__(self, url: str, number: int, turns: int, token: str = TOKEN, home: str | None = None):
        super().__init__(url, number, turns, "raw", token, home)

    async def run(self):
        pending = None
        attempts = 0
        async with no_cookie_client() as web:
            web.headers["Authorization"] = f"Bearer {self.token}"
            client = RawMcp(self.url, web, f"raw-{self.number}")
            client.pin = self.home  # until the first start has answered
            while self.completed < self.turns:
                attempts += 1
                if attempts > 400:
                    self.wrong.append("gave up: too many errors")
                    return
                try:
                    if self.handle is None:
                        start = await client.call("start", {})
                        client.pin = None
                        if start.get("isError"):
                            self.note(raw_text(start))
                            await anyio.sleep(0.1)
                            continue
                        record = raw_record(start, "turnscope/start")
                        self.replica, self.handle = record["replica"], record["handle"]
                    line = self.line()
                    said = line if pending is None else pending
                    reply = await client.call("chat", {"handle": self.handle, "line": said})
                    if reply.get("isError"):
                        pending = self.answered(said, line, raw_text(reply), None)
                        await anyio.sleep(0.2)
                    else:
                        pending = self.answered(said, line, None, raw_record(reply, "turnscope/turn"))
                except (RawHttpError, httpx.HTTPError) as e:
                    client.pin = None
                    pending = self.after_error(f"{type(e).__name__}: {e}")
                    await anyio.sleep(0.1)


def keeper(url, number, turns, mode, home=None):
    if mode == "raw":
        return RawKeeper(url, number, turns, home=home)
    return Keeper(url, number, turns, mode, home=home)
