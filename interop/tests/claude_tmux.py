"""The real Claude Code run interactively in tmux, on loopback only, for tests and for the demo
(interop/claude-code-tmux).

Claude Code declares the MCP tasks extension only in an interactive session (`claude -p` does
not), so what it does with a turn served as a task can only be seen this way: its screen read
back with `tmux capture-pane`, lines typed with `tmux send-keys`. Each instance has its own HOME
and CLAUDE_CONFIG_DIR; Claude Code's first-run screens are pre-answered in its config file
(onboarding, theme, the API key, the folder's trust dialog, the offer of auto mode) and its
permission mode is "default" with turnscope's tools allowed (auto mode needs Anthropic's own
classifier, which a stub cannot answer). Its model is played by servers/anthropic_stub.py.

Demo (the console, the stub and Claude Code side by side, all on free ports):
  python3 interop/tests/claude_tmux.py            # then: tmux attach -t turnscope-claude
  python3 interop/tests/claude_tmux.py stop
"""

import json
import os
import pathlib
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
INTEROP = HERE.parent
CLAUDE = INTEROP / "node_modules" / ".bin" / "claude"
KEY = "sk-ant-stub-key-for-the-tmux-tests-0000"
ALLOWED = ["mcp__turnscope__start", "mcp__turnscope__chat", "ToolSearch"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def claude_env(home: pathlib.Path, stub_url: str, extra=None) -> dict:
    """The whole environment Claude Code runs in here: its own HOME and config folder, its model
    at `stub_url` with a stub key, nothing sent anywhere else; then `extra`."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": stub_url,
        "ANTHROPIC_API_KEY": KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.update(extra or {})
    return env


def tmux(*args, check=True) -> str:
    done = subprocess.run(["tmux", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"tmux {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


class InteractiveClaude:
    """Claude Code in tmux (window `window` of session `session`, made when it does not exist),
    its model at `stub_url`, turnscope added as MCP server `turnscope` at `mcp_url`."""

    def __init__(self, stub_url, mcp_url, session, window="claude", extra_env=None, size=(160, 48), keep=False):
        if not CLAUDE.exists():
            raise RuntimeError(f"Claude Code not found at {CLAUDE}; run interop/run (it installs interop/package.json)")
        if not shutil.which("tmux"):
            raise RuntimeError("tmux is not installed; interop/run installs it (apt-get install -y tmux)")
        self.keep = keep
        self.home = pathlib.Path(tempfile.mkdtemp(prefix="claude-tmux-"))
        self.work = self.home / "work"
        self.work.mkdir()
        (self.home / ".claude").mkdir()
        (self.home / ".claude" / "settings.json").write_text(
            json.dumps({"permissions": {"defaultMode": "default", "allow": ALLOWED}})
        )
        self.env = claude_env(self.home, stub_url, {"TERM": "xterm-256color", **(extra_env or {})})
        added = subprocess.run(
            [str(CLAUDE), "mcp", "add", "--transport", "http", "turnscope", mcp_url],
            env=self.env, cwd=self.work, capture_output=True, text=True, timeout=60,
        )
        if added.returncode != 0:
            raise RuntimeError(f"claude mcp add failed: {added.stderr}")
        self.pre_answer()
        self.session = session
        self.target = f"{session}:{window}"
        command = " ".join(
            ["cd", shlex.quote(str(self.work)), "&&", "env", "-i"]
            + [shlex.quote(f"{k}={v}") for k, v in self.env.items()]
            + [shlex.quote(str(CLAUDE))]
        )
        if subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode == 0:
            tmux("new-window", "-t", session, "-n", window, command)
        else:
            tmux("new-session", "-d", "-s", session, "-x", str(size[0]), "-y", str(size[1]), "-n", window, command)
        self.wait_for("its prompt", lambda s: "? for shortcuts" in s, 60)

    def pre_answer(self):
        """Answers Claude Code's first-run screens in its config file, as a person would once."""
        path = self.home / ".claude" / ".claude.json"
        config = json.loads(path.read_text())
        config.update(
            {
                "hasCompletedOnboarding": True,
                "lastOnboardingVersion": "2.1.332",
                "theme": "dark",
                "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
                "autoUpdates": False,
                # "Make auto mode your default permission mode?", answered "No, keep manual mode".
                "hasSeenAutoDefaultNudge": True,
                "hasResetAutoModeOptInForDefaultOffer": True,
            }
        )
        config["projects"][str(self.work)].update({"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True})
        path.write_text(json.dumps(config, indent=2))

    def screen(self, history=200) -> str:
        """The window's text, with `history` lines of scrollback."""
        return tmux("capture-pane", "-p", "-J", "-S", f"-{history}", "-t", self.target)

    def type(self, line: str):
        """Types `line` at the prompt and presses Enter."""
        tmux("send-keys", "-t", self.target, "-l", line)
        time.sleep(0.3)
        tmux("send-keys", "-t", self.target, "Enter")

    def wait_for(self, what: str, check, timeout: float) -> str:
        """Waits until `check(screen)` holds; the screen then. Fails with the screen after
        `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"Claude Code never showed {what} within {timeout:.0f} s; its screen:\n{screen}")
            time.sleep(0.25)

    def close(self):
        tmux("kill-session", "-t", self.session, check=False)
        if not self.keep:
            shutil.rmtree(self.home, ignore_errors=True)


DEMO_SESSION = "turnscope-claude"
DEMO_CONFIG = """[server]
port = {port}
task_after_seconds = 5
[model]
pace = 0.4
words = 70
[bot]
name = "Hours"
description = "answers questions about the shop's opening hours"
greeting = "Hello, I am Hours."
"""
DEMO_SCRIPT = [
    {"tool": "ToolSearch", "input": {"query": "select:mcp__turnscope__start,mcp__turnscope__chat"}},
    {"tool": "mcp__turnscope__start", "input": {}},
    {"tool": "mcp__turnscope__chat", "input": {"handle": "$HANDLE", "line": "Tell me about your opening hours, in detail please"}},
    {"text": "The bot answers in the background; I will tell you when it is done."},
    # What its model says when the task completes, as docs/tasks.md's capture shows it (and
    # test_claude_code_tasks.py's script says it): Claude Code 2.1.332's ctrl+o does not show a
    # task's reply, so the line promises nothing of it.
    {"text": "The bot's answer is in."},
]


def demo():
    """The console (window "console"), the stub (window "stub") and Claude Code (window
    "claude") in tmux session turnscope-claude, on free ports; files in a temporary folder."""
    binary = os.environ.get("TURNSCOPE_BIN") or str(INTEROP.parent / "target" / "debug" / "turnscope")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="turnscope-claude."))
    port, stub_port = free_port(), free_port()
    (folder / "turnscope.toml").write_text(DEMO_CONFIG.format(port=port))
    (folder / "script.json").write_text(json.dumps(DEMO_SCRIPT))
    tmux("new-session", "-d", "-s", DEMO_SESSION, "-x", "160", "-y", "48", "-n", "stub",
         f"python3 {INTEROP / 'servers' / 'anthropic_stub.py'} {stub_port} {folder / 'script.json'}")
    tmux("new-window", "-t", DEMO_SESSION, "-n", "console",
         f"cd {folder} && {binary} --config {folder / 'turnscope.toml'} --events {folder / 'events.jsonl'}")
    time.sleep(2)
    # keep: the demo's HOME outlives this script (tmux keeps Claude Code running).
    claude = InteractiveClaude(f"http://127.0.0.1:{stub_port}", f"http://127.0.0.1:{port}/mcp", DEMO_SESSION, keep=True)
    print(f"tmux attach -t {DEMO_SESSION}   (windows: stub, console, claude; files in {folder}, HOME {claude.home})")


if __name__ == "__main__":
    if sys.argv[1:] == ["stop"]:
        tmux("kill-session", "-t", DEMO_SESSION, check=False)
    else:
        demo()
