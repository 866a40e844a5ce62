"""The official Python MCP SDK client: start, then one chat call with progress; prints one JSON
line ({reply, isError, progress, ms, protocol, read}) and exits cleanly. When the call came back
as an error (the caller cancelled, as under 2026-07-28 a closed stream is), `read` holds what a
following empty-line chat returned. interop/tests/test_resume.py runs it behind a proxy that cuts
the chat's response stream, and checks that it printed nothing on stderr.
Usage: python py_chat.py URL LINE [MODE]   (MODE: "auto" as the SDK defaults to, or "legacy")"""

import json
import sys
import time

import anyio
from mcp import Client


def text_of(result) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def main(url: str, line: str, mode: str) -> None:
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with Client(url, mode=mode) as client:
        start = await client.call_tool("start", {})
        handle = start.meta["turnscope/start"]["handle"]
        began = time.monotonic()
        with anyio.fail_after(20):
            result = await client.call_tool("chat", {"handle": handle, "line": line}, progress_callback=on_progress)
        ms = int((time.monotonic() - began) * 1000)
        read = None
        if result.is_error:
            read = text_of(await client.call_tool("chat", {"handle": handle, "line": ""}))
        protocol = getattr(client, "protocol_version", None) or getattr(getattr(client, "_session", None), "protocol_version", None)
        print(json.dumps({"reply": text_of(result), "isError": bool(result.is_error), "progress": len(seen), "ms": ms, "protocol": str(protocol), "read": read}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "auto")
