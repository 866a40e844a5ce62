"""Live reload under the official Python MCP SDK: one conversation on one handle while the
config file is rewritten under the server (a tool source added, then a bad file, then SIGHUP);
the SDK reads each turn's config version from the result's `_meta`, and the handle keeps
working throughout (docs/reload.md)."""

import asyncio
import pathlib
import signal
import time

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import Running, dev_binary
from replicas import handle_of, record_of, text_of

BEFORE = "[model]\npace = 0.0\n"
AFTER = BEFORE + f"""
[[mcp_servers]]
name = "math"
command = "{dev_binary()}"
args = ["fixture-server", "--stdio"]
tool_filter = ["add"]
"""


def save(running: Running, text: str):
    """Writes the config as an editor does: a new file renamed over the old one."""
    config = pathlib.Path(running.dir.name) / "turnscope.toml"
    fresh = config.with_suffix(".new")
    fresh.write_text(text)
    fresh.replace(config)


async def conversation(running: Running):
    async with streamable_http_client(running.url) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            handle = handle_of(await s.call_tool("start", {}))

            async def chat(line):
                result = await s.call_tool("chat", {"handle": handle, "line": line})
                assert not result.is_error, text_of(result)
                return text_of(result), record_of(result, "turnscope/turn")

            text, record = await chat("please add 2 and 3")
            assert record["config_version"] == 1
            assert "The add tool says" not in text

            save(running, AFTER)
            deadline = time.monotonic() + 20
            while True:
                text, record = await chat("please add 2 and 3")
                if record["config_version"] == 2:
                    break
                assert time.monotonic() < deadline, "the reload never applied"
                await asyncio.sleep(0.2)
            assert text.startswith("The add tool says: 5"), text
            assert [c["name"] for c in record["tool_calls"]] == ["add"]

            # A bad file changes nothing: the same handle, the same version, the tool still there.
            save(running, AFTER + "[bot]\nround_cap = -1\n")
            await asyncio.sleep(1.0)
            text, record = await chat("please add 4 and 5")
            assert record["config_version"] == 2
            assert text.startswith("The add tool says: 9"), text

            # SIGHUP with the file fixed again: nothing new to apply, and the server stays.
            save(running, AFTER)
            await asyncio.sleep(0.6)
            running.proc.send_signal(signal.SIGHUP)
            await asyncio.sleep(0.5)
            assert running.proc.poll() is None, "SIGHUP must not end a server with no terminal"
            text, record = await chat("what did I say")
            assert record["config_version"] == 2
            assert "please add 4 and 5" in text, text


def test_one_conversation_across_reloads_with_the_python_sdk():
    running = Running(["--headless", "--port", "0"], BEFORE)
    try:
        asyncio.run(conversation(running))
    finally:
        running.stop()
