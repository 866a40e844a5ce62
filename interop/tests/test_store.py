"""Conversations that outlive the process, with the official Python MCP SDK: a turnscope killed
with SIGKILL while a turn is streaming, restarted on the same store file, and the same handle
going on in a new MCP connection: the lost turn is reported once, in words for a model, and the
model is sent the history from before the kill."""

import pathlib
import tempfile

import anyio
import pytest
from mcp import Client

from conftest import Running
from results import text_of, turn_of

pytestmark = pytest.mark.anyio


async def test_a_handle_survives_kill_9_and_its_lost_turn_is_reported_once():
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:{pathlib.Path(folder) / 'sessions.sqlite3'}"
        args = ["--headless", "--port", "0", "--store", store]
        first = Running(args, "[model]\npace = 0.2\n")
        try:
            async with Client(first.url) as client:
                start = await client.call_tool("start", {})
                handle = start.meta["turnscope/start"]["handle"]
                said = await client.call_tool("chat", {"handle": handle, "line": "my name is Ada"})
                assert text_of(said) == "You said: my name is Ada", text_of(said)
                streaming = anyio.Event()

                async def on_progress(progress, total, message):
                    streaming.set()

                async def cut_off_chat():
                    try:
                        await client.call_tool(
                            "chat",
                            {"handle": handle, "line": "tell me a story"},
                            progress_callback=on_progress,
                        )
                    except Exception:  # the server died under the call
                        pass

                with anyio.move_on_after(10):
                    async with anyio.create_task_group() as calls:
                        calls.start_soon(cut_off_chat)
                        await streaming.wait()
                        first.proc.kill()  # SIGKILL: no chance to write anything more
                        first.proc.wait(timeout=5)
                        calls.cancel_scope.cancel()
                assert streaming.is_set(), "the turn was streaming when the server died"
        except BaseException:
            first.proc.kill()
            raise
        finally:
            first.dir.cleanup()

        second = Running(args, "[model]\npace = 0\n")
        try:
            async with Client(second.url) as client:
                lost = await client.call_tool("chat", {"handle": handle, "line": ""})
                assert not lost.is_error, text_of(lost)
                record = turn_of(lost)
                assert record["end_reason"] == "restarted", record
                assert record["line"] == "tell me a story" and record["reply"] == "", record
                assert '"tell me a story": it got no reply' in text_of(lost), text_of(lost)
                again = await client.call_tool("chat", {"handle": handle, "line": ""})
                assert turn_of(again)["end_reason"] is None, "reported once"
                recall = await client.call_tool("chat", {"handle": handle, "line": "what did I say"})
                assert not recall.is_error, text_of(recall)
                assert text_of(recall) == "Earlier you said: my name is Ada", text_of(recall)
        finally:
            second.stop()
