"""`turnscope test`: its JUnit report read by Python's xml.etree (as CI dashboards read it), and
a run with `--url` against a pipecat bot served by pipecat-mcp-transport, whose model is
`turnscope model serve`: reply and time-budget cases pass, a tool-call expectation is reported
as not checkable (the transport's results are text only)."""

import json
import os
import pathlib
import socket
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

from conftest import ROOT, binary

FAILING = """
[[case]]
name = "wrong <reply> & more"
[[case.turn]]
say = "hello"
reply_contains = "goodbye"
"""


def run_test(*args, cwd):
    return subprocess.run(
        [binary(), "test", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_junit_report_parses_with_xml_etree(tmp_path):
    (tmp_path / "failing.test.toml").write_text(FAILING)
    example = str(ROOT / "examples" / "bot.test.toml")
    done = run_test(
        "--pace", "0", "--jobs", "4", "--junit", "report.xml", example, "failing.test.toml", cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    root = ET.parse(tmp_path / "report.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("9", "1", "0")
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [example, "failing.test.toml"]
    assert len(suites[0].findall("testcase")) == 8
    assert all(c.find("failure") is None for c in suites[0].findall("testcase"))
    (case,) = suites[1].findall("testcase")
    assert case.get("name") == "wrong <reply> & more"
    failure = case.find("failure")
    assert 'expected a reply containing "goodbye"' in failure.get("message")
    assert 'got "You said: hello"' in failure.text
    assert float(case.get("time")) >= 0
    # It quotes the replies: readable by its owner only, as --events is.
    assert (tmp_path / "report.xml").stat().st_mode & 0o777 == 0o600


PIPECAT_CASES = """
[[case]]
name = "replies within budget"
[[case.turn]]
say = "hello there"
reply_contains = "You said: hello there"
reply_not_contains = "error"
reply_matches = '^You said: '
no_error = true
first_piece_ms = 10000
total_ms = 20000
[[case.turn]]
say = "what did I say"
reply_contains = "hello there"
"""

TOOL_CASE = """
[[case]]
name = "calls echo"
[[case.turn]]
say = "echo hi"
tools = [{ name = "echo", args = { text = "hi" } }]
"""


@pytest.fixture
def pipecat_bot(model_server):
    python = os.environ.get("TURNSCOPE_PIPECAT_PYTHON")
    if not python:
        pytest.fail("TURNSCOPE_PIPECAT_PYTHON is not set: interop/run installs pipecat and sets it")
    proc = subprocess.Popen(
        [python, str(ROOT / "interop" / "servers" / "pipecat_bot.py"), "--model-url", model_server],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        url = next((w for w in line.split() if w.startswith("http://")), None)
        assert url, f"the pipecat bot printed no URL: {line!r}"
        port = int(url.split(":")[2].split("/")[0])
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the pipecat bot did not listen within 60 s"
                assert proc.poll() is None, "the pipecat bot exited"
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_pipecat_bot_over_mcp_passes_replies_and_budgets_and_tools_are_not_checkable(
    tmp_path, pipecat_bot
):
    (tmp_path / "pipecat.test.toml").write_text(PIPECAT_CASES)
    (tmp_path / "tools.test.toml").write_text(TOOL_CASE)
    done = run_test("--url", pipecat_bot, "--json", "pipecat.test.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(l) for l in done.stdout.splitlines()]
    assert [(l["case"], l["status"]) for l in lines[:-1]] == [("replies within budget", "passed")]

    done = run_test(
        "--url", pipecat_bot, "--json", "--junit", "report.xml", "pipecat.test.toml", "tools.test.toml",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    cases = {l["case"]: l for l in map(json.loads, done.stdout.splitlines()) if l["type"] == "case"}
    assert cases["replies within budget"]["status"] == "passed"
    tool = cases["calls echo"]
    assert tool["status"] == "error", tool
    run = tool["not_passed"][0]
    assert "`tools` is not checkable against this target" in run["error"], run
    assert run["reported"] == "text_only"
    assert "hi" in run["reply"], "the bot did answer; only its tool calls are unknown"
    error = ET.parse(tmp_path / "report.xml").getroot().find("testsuite[@name='tools.test.toml']/testcase/error")
    assert error is not None and "not checkable" in error.get("message")
