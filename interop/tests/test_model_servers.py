"""The official Python MCP SDK client reading a turn the token limit cut: the chat record's
`end_reason` is `length` (inside the tool's declared output schema, which the SDK checks) and
it carries the turn's usage, on the embedded model with `[model] max_tokens`."""

import pytest
from mcp import Client

from conftest import Running
from results import text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def capped_server():
    running = Running(["--headless", "--port", "0"], "[model]\npace = 0.0\nmax_tokens = 3\n")
    yield running
    running.stop()


async def test_a_reply_cut_by_the_token_limit_reads_length_with_its_usage(capped_server):
    async with Client(capped_server.url) as client:
        handle = (await client.call_tool("start", {})).meta["turnscope/start"]["handle"]
        reply = await client.call_tool("chat", {"handle": handle, "line": "one two three four"})
        assert not reply.is_error, text_of(reply)
        record = reply.meta["turnscope/turn"]
        assert record["end_reason"] == "length", record
        assert record["finish_reason"] == "length"
        assert record["reply"] == "You said: one"
        assert record["usage"]["completion_tokens"] == 3
        assert record["usage"]["prompt_tokens"] > 4
