"""Replicas behind HAProxy on loopback for the interop test (tests/test_replicas.py): start N headless turnscope replicas on
free ports, HAProxy in front of them from examples/haproxy.cfg (its backend lines printed by
`turnscope replicas haproxy`), and clients that chat through it and start again elsewhere when
told to: Python `mcp` SDK clients, and a raw sessionless 2026-07-28 client that keeps no
cookies (as Claude Code).
"""

import http.cookiejar
import json
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
import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from results import text_of

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

    def __init__(self, rid: str, config_text: str, drain_seconds: float, args=(), port=0):
        self.id = rid
        self.args = list(args)
        self.drain_seconds = drain_seconds
        self.dir = tempfile.TemporaryDirectory()
        self.config = pathlib.Path(self.dir.name) / "turnscope.toml"
        self.config.write_text(config_text)
        self.launch(port)

    def launch(self, port):
        """Starts the process (`--port port`, 0 for any free one); its URL from the ready line."""
        rid = self.id
        self.proc = subprocess.Popen(
            [binary(), "--headless", "--port", str(port), "--replica-id", rid,
             "--drain-seconds", str(self.drain_seconds), "--sessions", "200", "--config", str(self.config),
             *self.args],
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

    def restart(self):
        """Starts it again on the port it had (after it died), so the balancer's line for it holds."""
        assert self.proc.poll() is not None, "restart a replica that is gone"
        self.launch(self.port)

    def health(self, token=None):
        """(HTTP status, body) of its /healthz."""
        request = urllib.request.Request(self.base + "/healthz")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    async def drain(self, token=None):
        """Sends SIGTERM and watches /healthz until it stops saying 200: (status, body) then
        (None, None if it never did within a second)."""
        self.proc.send_signal(signal.SIGTERM)
        for _ in range(200):
            status, body = await anyio.to_thread.run_sync(self.health, token)
            if status != 200:
                return status, body
            await anyio.sleep(0.005)
        return None, None

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
    """HAProxy running examples/haproxy.cfg with its frontend moved and the backend's server and
    use-server lines replaced by what `turnscope replicas haproxy` prints for `replicas`."""

    def __init__(self, replicas, route_by_handle=True, route_tasks=True, token=None, up_within=20,
                 events_follow_session=True):
        self.dir = tempfile.TemporaryDirectory()
        self.port = free_port()
        text = EXAMPLE.read_text()
        text = text.replace("bind 127.0.0.1:7880", f"bind 127.0.0.1:{self.port}")
        self.lines = subprocess.run(
            [binary(), "replicas", "haproxy", *(f"{r.id}=127.0.0.1:{r.port}" for r in replicas)],
            capture_output=True, text=True, check=True,
        ).stdout
        # The recipe ends with the command's lines for its own three replicas.
        cut = text.index("    # Printed by `turnscope replicas haproxy")
        text = text[:cut] + self.lines
        if not route_by_handle:  # the control of the tests: every request balanced on its own
            text = "\n".join(l for l in text.splitlines() if "use-server" not in l) + "\n"
        if not route_tasks:  # the control of the task tests: polls not routed by Mcp-Name
            text = "\n".join(l for l in text.splitlines() if "req.hdr(mcp-name)" not in l) + "\n"
        if not events_follow_session:  # a balancer that spreads /events whatever the session
            text = text.replace(
                "    stick match req.hdr(mcp-session-id)\n",
                "    http-request del-header mcp-session-id if { path /events }\n"
                "    stick match req.hdr(mcp-session-id)\n",
            )
        self.config = pathlib.Path(self.dir.name) / "haproxy.cfg"
        self.config.write_text(text)
        # The recipe's health check sends the replicas' token from HAProxy's environment.
        env = dict(os.environ)
        env.pop("TURNSCOPE_AUTH_TOKEN", None)
        if token:
            env["TURNSCOPE_AUTH_TOKEN"] = token
        self.token = token
        self.proc = subprocess.Popen(
            [haproxy(), "-db", "-f", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        if up_within:
            try:
                self.wait_until_all_up(replicas, up_within)
            except RuntimeError:
                self.stop()
                raise

    def wait_until_all_up(self, replicas, within):
        """Until /healthz through the balancer has answered from every replica."""
        want = {r.id for r in replicas}
        seen = set()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/healthz")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited: {self.proc.stderr.read()}")
            try:
                with urllib.request.urlopen(request, timeout=5) as r:
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


def record_of(result, key: str) -> dict:
    """The machine-readable record of an SDK tool result: `_meta[key]` ("turnscope/start",
    "turnscope/turn") when the server puts it there, else the structured content."""
    meta = getattr(result, "meta", None) or {}
    return meta.get(key) or result.structured_content or {}


def handle_of(result) -> str:
    """The handle a `start` result gives."""
    return record_of(result, "turnscope/start").get("handle") or text_of(result)


# What a client is told when its replica is gone or going: the handle belongs elsewhere, the
# replica drains, its MCP session is unknown where it landed, or (the SDK's and httpx's own
# words) the connection or stream broke for good: httpx's "peer closed connection without
# sending complete message body" is what the raw client hears when the replica dies while it
# streams a reply. Never a timeout.
CLEAR = (
    "Server disconnected",
    "peer closed connection without sending complete message body",
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


# The recipe's cookie naming a client's replica (`cookie turnscope_replica insert indirect`).
REPLICA_COOKIE = "turnscope_replica"


def pinned_to(home: str | None) -> dict:
    """The header that sends a request to replica `home` through the balancer (its cookie), or
    none. A test pins a client's first opening to know which replica each kind of client is
    on, rather than counting on how the round robin dealt clients that opened at once."""
    return {"cookie": f"{REPLICA_COOKIE}={home}"} if home else {}


class Chatter:
    """One MCP client saying `turns` lines in order through `url`; when a call fails (its
    replica died or drains) it notes the error and its time, reconnects, calls `start`
    again and says the same line again. Every line must come back as a completed turn that
    echoes it. With `home`, its first opening goes to that replica (`pinned_to`); later ones
    go where the balancer sends them."""

    def __init__(self, url: str, number: int, turns: int, mode: str, home: str | None = None):
        self.url, self.number, self.turns, self.mode, self.home = url, number, turns, mode, home
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
                http = create_mcp_http_client(headers=pinned_to(self.home if attempts == 1 else None))
                async with http, Client(
                    streamable_http_client(self.url, http_client=http), mode=self.mode, read_timeout_seconds=30
                ) as client:
                    start = await client.call_tool("start", {})
                    if start.is_error:
                        self.note(text_of(start))
                        await anyio.sleep(0.1)
                        continue
                    self.replicas.append(record_of(start, "turnscope/start")["replica"])
                    handle = handle_of(start)
                    while self.completed < self.turns:
                        line = f"client {self.number} line {self.completed}"
                        reply = await client.call_tool("chat", {"handle": handle, "line": line})
                        if reply.is_error:
                            self.note(text_of(reply))
                            break
                        turn = record_of(reply, "turnscope/turn")
                        said = turn.get("reply") or text_of(reply)
                        if not said.startswith(f"You said: {line}") or turn.get("end_reason") != "completed":
                            self.wrong.append((line, said, turn.get("end_reason")))
                        self.completed += 1
                        if pace_between:
                            await anyio.sleep(pace_between)
            except Exception as e:  # noqa: BLE001 - every failure is recorded and judged by the test
                for leaf in root_errors(e):
                    self.note(f"{type(leaf).__name__}: {leaf}")
                await anyio.sleep(0.05)


# A sessionless client keeps no cookie: this policy refuses every cookie it is offered.
NO_COOKIES = http.cookiejar.DefaultCookiePolicy(allowed_domains=[])
REVISION = "2026-07-28"


class RawMcp:
    """A sessionless MCP 2026-07-28 client over plain HTTP that keeps nothing between requests,
    as Claude Code 2.1.x does: `server/discover` instead of `initialize`, no Mcp-Session-Id,
    the revision in every request's `_meta` and in the Mcp-Method / Mcp-Name headers, and no
    cookies (it counts the Set-Cookie headers it was offered and the Cookie headers it sent).
    With `tasks`, it declares the MCP tasks extension in every request, as Claude Code run
    interactively does, and names the task in Mcp-Name on `tasks/*`."""

    def __init__(self, url: str, web: httpx.AsyncClient, name: str, tasks: bool = False, mirror: bool = False):
        self.url, self.web, self.name, self.tasks = url, web, name, tasks
        # Mirror `chat`'s handle in Mcp-Param-Handle, as its x-mcp-header annotation asks
        # (Claude Code and the Python SDK do; by default this client does not).
        self.mirror = mirror
        self.next_id = 0
        self.offered_cookies = 0
        self.sent_cookies = 0
        self.pin = None  # a replica the requests go to (`pinned_to`) until this is None again

    async def request(self, method: str, params: dict | None = None) -> dict:
        """One JSON-RPC request; its `result` (or `error`) message. An HTTP error raises
        `RawHttpError` with the status and body; the response may be JSON or an SSE stream."""
        self.next_id += 1
        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": REVISION,
            "io.modelcontextprotocol/clientCapabilities": (
                {"extensions": {"io.modelcontextprotocol/tasks": {}}} if self.tasks else {}
            ),
            "io.modelcontextprotocol/clientInfo": {"name": self.name, "version": "0"},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": REVISION,
            "mcp-method": method,
        }
        if method == "tools/call":
            headers["mcp-name"] = params["name"]
            if self.mirror and "handle" in params.get("arguments", {}):
                headers["mcp-param-handle"] = params["arguments"]["handle"]
        elif method.startswith("tasks/"):
            headers["mcp-name"] = params["taskId"]
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        headers |= pinned_to(self.pin)
        response = await self.web.post(self.url, json=body, headers=headers)
        self.offered_cookies += "set-cookie" in response.headers
        self.sent_cookies += "cookie" in response.request.headers and not self.pin
        if response.status_code != 200:
            raise RawHttpError(response.status_code, response.text)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for event in response.text.split("\n\n"):
                data = "\n".join(l[5:].lstrip() for l in event.splitlines() if l.startswith("data:"))
                if data:
                    message = json.loads(data)
                    if message.get("id") == self.next_id:
                        return message
            raise RawHttpError(200, f"no answer to request {self.next_id} in the stream: {response.text[:300]}")
        return response.json()

    async def call(self, tool: str, arguments: dict) -> dict:
        """A `tools/call`'s result (`content`, `isError`, `_meta`, `structuredContent`)."""
        message = await self.request("tools/call", {"name": tool, "arguments": arguments})
        if "error" in message:
            raise RawHttpError(200, f"JSON-RPC error: {message['error']}")
        return message["result"]


class RawHttpError(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(f"HTTP {status}: {text}")
        self.status, self.text = status, text


def raw_text(result: dict) -> str:
    return "".join(b.get("text", "") for b in result.get("content", []) if b.get("type") == "text")


def raw_record(result: dict, key: str) -> dict:
    """`_meta[key]` of a raw result when the server puts its record there, else the structured
    content (see `record_of`)."""
    return (result.get("_meta") or {}).get(key) or result.get("structuredContent") or {}


def no_cookie_client() -> httpx.AsyncClient:
    """An HTTP client whose cookie jar refuses every cookie (httpx copies a jar it is given
    into its own, so the policy goes on that one)."""
    web = httpx.AsyncClient(timeout=30)
    web.cookies.jar.set_policy(NO_COOKIES)
    return web


class RawChatter(Chatter):
    """A `Chatter` speaking through `RawMcp`: each attempt discovers, lists the tools, starts,
    then says its lines; every request is balanced on its own except as its handle routes it."""

    def __init__(self, url: str, number: int, turns: int, home: str | None = None):
        super().__init__(url, number, turns, "raw", home)
        self.offered_cookies = 0
        self.sent_cookies = 0

    async def run(self, pace_between: float = 0.0):
        attempts = 0
        async with no_cookie_client() as web:
            client = RawMcp(self.url, web, f"raw-{self.number}")
            client.pin = self.home  # the first opening only: `attempt` unpins after its start
            try:
                while self.completed < self.turns:
                    attempts += 1
                    if attempts > self.turns + 20:
                        self.wrong.append("gave up: too many reconnections")
                        return
                    try:
                        await self.attempt(client, pace_between)
                    except (RawHttpError, httpx.HTTPError) as e:
                        self.note(f"{type(e).__name__}: {e}")
                        await anyio.sleep(0.05)
                    finally:
                        client.pin = None
            finally:
                self.offered_cookies, self.sent_cookies = client.offered_cookies, client.sent_cookies

    async def attempt(self, client: RawMcp, pace_between: float):
        discovered = await client.request("server/discover")
        if "result" not in discovered:
            raise RawHttpError(200, f"server/discover failed: {discovered}")
        listed = await client.request("tools/list")
        if {t["name"] for t in listed["result"]["tools"]} < {"start", "chat"}:
            raise RawHttpError(200, f"tools/list lacks start/chat: {listed}")
        start = await client.call("start", {})
        client.pin = None
        if start.get("isError"):
            self.note(raw_text(start))
            await anyio.sleep(0.1)
            return
        record = raw_record(start, "turnscope/start")
        self.replicas.append(record["replica"])
        handle = record.get("handle") or raw_text(start)
        while self.completed < self.turns:
            line = f"client {self.number} line {self.completed}"
            reply = await client.call("chat", {"handle": handle, "line": line})
            if reply.get("isError"):
                self.note(raw_text(reply))
                return
            turn = raw_record(reply, "turnscope/turn")
            said = turn.get("reply") or raw_text(reply)
            if not said.startswith(f"You said: {line}") or turn.get("end_reason") != "completed":
                self.wrong.append((line, said, turn.get("end_reason")))
            self.completed += 1
            if pace_between:
                await anyio.sleep(pace_between)


class TaskChatter:
    """A `RawMcp` client declaring the tasks extension saying `turns` lines through `url`, each
    answered with a task (the replicas make every chat one) that it polls to its end at the
    interval asked. Notes every refused poll (another replica got it) and every wrong reply."""

    def __init__(self, url: str, number: int, turns: int):
        self.url, self.number, self.turns = url, number, turns
        self.completed = 0
        self.polls = 0
        self.working = 0  # polls answered `working`
        self.refused = []  # the error of each poll that was not answered
        self.wrong = []
        self.misplaced = []  # (task id, handle) whose tags differ

    async def run(self):
        async with no_cookie_client() as web:
            client = RawMcp(self.url, web, f"task-{self.number}", tasks=True)
            start = await client.call("start", {})
            handle = raw_record(start, "turnscope/start")["handle"]
            for n in range(self.turns):
                line = f"client {self.number} line {n}"
                created = await client.call("chat", {"handle": handle, "line": line})
                if created.get("resultType") != "task":
                    self.wrong.append(("no task", line, created))
                    continue
                task = created["taskId"]
                if task[-4:] != handle[-4:]:
                    self.misplaced.append((task, handle))
                while True:
                    self.polls += 1
                    answer = await client.request("tasks/get", {"taskId": task})
                    if "error" in answer:
                        self.refused.append(answer["error"])
                        break
                    got = answer["result"]
                    self.working += got["status"] == "working"
                    if got["status"] != "working":
                        said = raw_record(got.get("result", {}), "turnscope/turn").get("reply", "")
                        if got["status"] != "completed" or not said.startswith(f"You said: {line}"):
                            self.wrong.append((line, got["status"], said))
                        else:
                            self.completed += 1
                        break
                    await anyio.sleep(got["pollIntervalMs"] / 1000)
