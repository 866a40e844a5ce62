"""`turnscope attach` behind HAProxy (the recipe, examples/haproxy.cfg) in front of three replicas
sharing a real Redis: the console, run in tmux as a person runs it, chats through the balancer.

Its event stream (`/events`) is one more request to the balancer. The console sends its MCP
session along with it, so the recipe keeps the stream on the replica that session lives on: the
console shows the whole instrument of the replica its own conversation runs on, and after being
started again (a new MCP session, which the balancer puts on the next replica) its next line goes
on in the same conversation there. With a balancer that spreads `/events` anyway, the console
still answers at once, says where its session lives, lists its own MCP exchanges, and a console
started again still goes on in the same conversation. When the replica of the console's session
dies, the client's new session lands on another, and the stream follows it there.
"""

import json
import shlex
import shutil
import subprocess
import time
import urllib.request

import pytest

from replicas import Balancer, Replica, binary
from shared_store import RedisServer, TOKEN, store_args

# Replies not cut, so a reply shows the conversation's history ("Earlier you said: …").
WHOLE = "[model]\npace = 0.01\n"


@pytest.fixture
def replicas():
    if not shutil.which("tmux"):
        raise RuntimeError("tmux is not installed; interop/run installs it (apt-get install -y tmux)")
    redis = RedisServer()
    started = []
    try:
        for i in (1, 2, 3):
            started.append(Replica(f"r{i}", WHOLE, drain_seconds=5, args=["--store", redis.url, *store_args()]))
        yield started
    finally:
        for r in started:
            r.stop()
        redis.close()


class AttachedConsole:
    """`turnscope attach URL` in a tmux session of its own; `state` is its state folder, where it
    keeps the handles of the sessions it started (so a console started again goes on in them)."""

    def __init__(self, url, state, name):
        self.name = name
        command = " ".join(
            ["env", shlex.quote(f"XDG_STATE_HOME={state}"), "TERM=xterm-256color", shlex.quote(binary()),
             "attach", shlex.quote(url), "--auth-token", shlex.quote(TOKEN)]
        )
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "45", command], check=True)

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        ).stdout

    def wait(self, text, within=20.0) -> str:
        deadline = time.monotonic() + within
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never on the console's screen:\n{screen}")

    def keys(self, *keys):
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def line(self, text):
        self.keys("-l", text)
        self.keys("Enter")

    def watched(self) -> str:
        """The replica the console's event stream comes from (its header says)."""
        header = self.wait("watching r").splitlines()[1]
        return header.split("watching ", 1)[1].split(" ", 1)[0]

    def quit(self):
        self.keys("C-c")
        deadline = time.monotonic() + 10
        while subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode == 0:
            if time.monotonic() > deadline:
                subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)
                raise AssertionError("the console did not quit on Ctrl+C")
            time.sleep(0.1)


def probe(balancer) -> str:
    """The replica that answers a `/healthz` through the balancer (round robin's next)."""
    request = urllib.request.Request(balancer.url.rsplit("/", 1)[0] + "/healthz")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=5) as answer:
        return json.loads(answer.read())["replica"]["id"]


def sessions_on(replicas) -> dict:
    """Open sessions per replica id, from each replica's /healthz."""
    counts = {}
    for r in replicas:
        request = urllib.request.Request(f"http://127.0.0.1:{r.port}/healthz")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        with urllib.request.urlopen(request, timeout=5) as answer:
            counts[r.id] = json.loads(answer.read())["sessions"]
    return counts


def test_the_console_watches_the_replica_its_session_lives_on_and_goes_on_there_when_started_again(
    replicas, tmp_path
):
    balancer = Balancer(replicas, token=TOKEN)
    try:
        console = AttachedConsole(balancer.url, tmp_path / "state", "attach-follow")
        watched = console.watched()
        console.line("my name is Ada")
        screen = console.wait("turn 1 · completed")
        # The stream shows the session (stream-numbered, opened by this client over MCP, listed
        # as the person's), so it lives on the watched replica, and only there.
        assert "1000001" not in screen, screen
        assert "attach (you)" in screen, screen
        assert sessions_on(replicas)[watched] == 1, (watched, sessions_on(replicas))
        console.quit()

        # Started again: a new MCP session, which the balancer puts on the next replica.
        console = AttachedConsole(balancer.url, tmp_path / "state", "attach-follow")
        again = console.watched()
        assert again != watched, "round robin puts the new MCP session on the next replica"
        console.line("what did I say")
        console.wait("Earlier you said: my name is Ada")
        screen = console.wait("turn 2 · completed")
        assert "1000001" not in screen, screen
        console.quit()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", "attach-follow"], capture_output=True)
        balancer.stop()


def test_with_a_balancer_that_spreads_the_stream_the_console_says_where_its_session_lives(replicas, tmp_path):
    balancer = Balancer(replicas, token=TOKEN, events_follow_session=False)
    try:
        console = AttachedConsole(balancer.url, tmp_path / "state", "attach-spread")
        watched = console.watched()
        console.line("my name is Ada")
        screen = console.wait("turn 1 · completed", within=10)
        # Round robin put the stream on another replica than the MCP session: the console shows
        # its session as its client sees it, and says where it lives.
        assert "1000001" in screen, screen
        lives = [r.id for r in replicas if sessions_on([r])[r.id] == 1]
        assert len(lives) == 1 and lives[0] != watched, (lives, watched)
        console.keys("Escape", "8")
        console.wait(f"#1000001 lives on replica {lives[0]}")
        # Its own MCP exchanges are listed: the watched replica's stream does not carry them.
        console.keys("9")
        console.wait("tools/call chat")
        console.quit()

        # Started again, the kept handle's conversation goes on (reopened from Redis), wherever
        # the new MCP session and the stream land.
        console = AttachedConsole(balancer.url, tmp_path / "state", "attach-spread")
        console.watched()
        console.line("what did I say")
        console.wait("Earlier you said: my name is Ada")
        # Shown as this client sees it or by the stream, the conversation's second turn is
        # numbered 2 (the reopening's answer counts the turns before it).
        console.wait("turn 2 · completed")
        console.quit()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", "attach-spread"], capture_output=True)
        balancer.stop()


def test_the_console_goes_on_in_its_conversation_when_its_replica_is_killed(replicas, tmp_path):
    balancer = Balancer(replicas, token=TOKEN)
    try:
        console = AttachedConsole(balancer.url, tmp_path / "state", "attach-kill")
        watched = console.watched()
        console.line("my name is Ada")
        console.wait("turn 1 · completed")
        dead = next(r for r in replicas if r.id == watched)
        dead.proc.kill()
        dead.proc.wait()
        # The stream reconnects to another replica and the MCP client opens a new session (the
        # old one died with its replica); the next line goes on in the same conversation, loaded
        # from Redis, whichever replica the new session reached.
        console.wait("the event stream now comes from replica", within=15)
        fallback = console.watched()
        other = next(r.id for r in replicas if r is not dead and r.id != fallback)
        # Round robin between the two left: after a probe answered by `other`, the console's
        # chat in its dead session goes to `fallback` (which answers that it knows no such
        # session) and the new session's `initialize` to `other`: away from the replica the
        # stream comes from, so the console must follow its session there.
        while probe(balancer) != other:
            pass
        console.line("what did I say")
        screen = console.wait("Earlier you said: my name is Ada")
        # The new MCP session went to one of the two replicas left, and the stream follows it
        # there (it asks again with the new session, which the recipe keeps on its replica):
        # the console shows its own conversation's frames again, one row for it, by the stream.
        lives = [r.id for r in replicas if r is not dead and sessions_on([r])[r.id] == 1]
        assert len(lives) == 1, lives
        screen = console.wait(f"watching {lives[0]}")
        assert "1000001" not in screen, screen
        assert "Sessions · 1 open" in screen, screen
        console.quit()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", "attach-kill"], capture_output=True)
        balancer.stop()
