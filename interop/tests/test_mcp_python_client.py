"""The official Python MCP SDK client driving turnscope's start/chat over streamable HTTP."""

import anyio
import httpx
import pytest
from mcp import Client

from results import text_of, turn_of

pytestmark = pytest.mark.anyio


def handle_of(start) -> str:
    return start.meta["turnscope/start"]["handle"]


async def test_start_and_chat(server):
    async with Client(server.url) as client:
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["start", "chat"]
        start = await client.call_tool("start", {})
        handle = handle_of(start)
        assert len(handle) == 36
        assert f"Handle: {handle}" in text_of(start) and start.structured_content is None
        reply = await client.call_tool("chat", {"handle": handle, "line": "hello there"})
        assert not reply.is_error
        assert text_of(reply).startswith("You said: hello there")
        assert len(text_of(reply).split()) == 12
        assert reply.structured_content is None
        assert turn_of(reply)["end_reason"] == "completed"
        assert turn_of(reply)["reply"] == text_of(reply)


async def test_one_progress_notification_per_piece(server):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async with Client(server.url) as client:
        handle = handle_of(await client.call_tool("start", {}))
        reply = await client.call_tool("chat", {"handle": handle, "line": "count"}, progress_callback=on_progress)
        assert [p for p, _ in seen] == list(range(1, 13))
        # Each message is the reply so far, as a person watching reads it.
        words = text_of(reply).split(" ")
        assert [m for _, m in seen] == [" ".join(words[: i + 1]) for i in range(12)]


async def test_cancel_then_read_the_whole_reply(slow_server):
    async with Client(slow_server.url) as client:
        handle = handle_of(await client.call_tool("start", {}))
        with anyio.move_on_after(0.2) as scope:
            await client.call_tool("chat", {"handle": handle, "line": "a long story"})
        assert scope.cancelled_caught
        reply = await client.call_tool("chat", {"handle": handle, "line": ""})
        assert text_of(reply).startswith("You said: a long story")
        assert len(text_of(reply).split()) == 30
        again = await client.call_tool("chat", {"handle": handle, "line": ""})
        assert turn_of(again)["turn"] is None and text_of(again).startswith("[Nothing to read")


async def test_concurrent_calls_on_one_handle_keep_replies_apart(server):
    async with Client(server.url) as client:
        handle = handle_of(await client.call_tool("start", {}))
        replies = {}

        async def say(line):
            replies[line] = text_of(await client.call_tool("chat", {"handle": handle, "line": line}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(say, "first")
            tg.start_soon(say, "second")
        assert replies["first"].startswith("You said: first")
        assert replies["second"].startswith("You said: second")
        assert "second" not in replies["first"] and "first" not in replies["second"]


async def test_errors_are_tool_errors_naming_the_field(server):
    async with Client(server.url) as client:
        short = await client.call_tool("chat", {"handle": "abc", "line": "hi"})
        assert short.is_error
        assert "36 characters" in text_of(short) and "received 3" in text_of(short)
        unknown = await client.call_tool("chat", {"handle": "00000000-0000-4000-8000-000000000000", "line": "hi"})
        assert unknown.is_error and "Call start" in text_of(unknown)
        wrong = await client.call_tool("chat", {"handle": 7})
        assert wrong.is_error and text_of(wrong).startswith("handle: expected a string")
        # A line under another name is refused, not read as an empty line that drops it.
        handle = handle_of(await client.call_tool("start", {}))
        misnamed = await client.call_tool("chat", {"handle": handle, "text": "hi"})
        assert misnamed.is_error and text_of(misnamed).startswith("text: not an argument of chat")


def test_foreign_host_and_origin_are_refused(server):
    health = server.url.replace("/mcp", "/healthz")
    assert httpx.get(health).status_code == 200
    assert httpx.get(health, headers={"Host": "evil.example"}).status_code == 421
    assert httpx.get(health, headers={"Origin": "http://evil.example"}).status_code == 403
    post = httpx.post(
        server.url,
        headers={"Host": "evil.example", "Accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert post.status_code == 421
