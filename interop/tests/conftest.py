"""Fixtures: the real turnscope binary, started headless on a free port."""

import os
import pathlib
import subprocess
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def binary() -> str:
    path = os.environ.get("TURNSCOPE_BIN") or str(ROOT / "target" / "debug" / "turnscope")
    if not os.path.exists(path):
        pytest.fail(f"turnscope binary not found at {path}; run `cargo build` first or set TURNSCOPE_BIN")
    return path


def dev_binary() -> str:
    """`turnscope-dev` (the fixture MCP server, the pseudo-terminal driver), built beside the
    binary by the same `cargo build`."""
    path = str(pathlib.Path(binary()).with_name("turnscope-dev"))
    if not os.path.exists(path):
        pytest.fail(f"turnscope-dev not found at {path}; `cargo build` builds it beside turnscope")
    return path


@pytest.fixture
def anyio_backend():
    """The anyio tests run on asyncio (the SDK clients' loop), never trio."""
    return "asyncio"


class Running:
    """A turnscope process and the URL it printed."""

    def __init__(self, args, config_text=""):
        self.dir = tempfile.TemporaryDirectory()
        config = pathlib.Path(self.dir.name) / "turnscope.toml"
        config.write_text(config_text)
        self.proc = subprocess.Popen(
            [binary(), *args, "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline()
        words = [w for w in line.split() if w.startswith("http://")]
        if not words:
            self.stop()
            pytest.fail(f"turnscope printed no URL: {line!r}")
        self.url = words[0]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.dir.cleanup()


@pytest.fixture
def server():
    """turnscope --headless with the embedded model at 10 ms per word, 12-word answers."""
    running = Running(["--headless", "--port", "0"], "[model]\npace = 0.01\nwords = 12\n")
    yield running
    running.stop()


@pytest.fixture
def slow_server():
    """turnscope --headless with a model slow enough to cancel mid-turn."""
    running = Running(["--headless", "--port", "0"], "[model]\npace = 0.03\nwords = 30\n")
    yield running
    running.stop()


@pytest.fixture
def model_server():
    """turnscope model serve: the embedded scripted model alone."""
    proc = subprocess.Popen(
        # Paced (10 ms a word) as a real server streams: at zero pace the whole answer is one
        # body, and a bot over it (pipecat) sends no progress before its reply.
        [binary(), "model", "serve", "--port", "0", "--pace", "0.01", "--words", "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()
    url = [w for w in line.split() if w.startswith("http://")][0]
    yield url
    proc.terminate()
    proc.wait(timeout=5)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow_first: the replica cluster's first replica has slow turns")
    config.addinivalue_line("markers", "no_task_routing: the task cluster's balancer has no Mcp-Name line (the control)")
