"""A small MCP server written with the Python `mcp` SDK (2.x), for turnscope's interop suite.

Tools (their names carry a `py_` prefix so they never collide with turnscope's built-ins or
the Rust fixture): `py_echo(text)`, `py_add(a, b)`, `py_fail(message)` (an isError result)
and `py_image()` (a tiny PNG plus a text block).

    python python_server.py stdio
    python python_server.py sse PORT               # legacy HTTP+SSE at http://127.0.0.1:PORT/sse
    python python_server.py streamable-http PORT   # streamable HTTP at http://127.0.0.1:PORT/mcp

Requires `pip install "mcp>=2.1.1,<3"`. Logs go to stderr; stdout carries only MCP (stdio).
"""

import base64
import sys

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# One teal pixel, the same image turnscope's Rust fixture returns.
TINY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mPQ6w4HAAH7ARFK28dFAAAAAElFTkSuQmCC"
)

server = MCPServer("turnscope-interop-python", version="0.1.0")


@server.tool()
def py_echo(text: str) -> str:
    """Return `text` unchanged."""
    return text


@server.tool()
def py_add(a: float, b: float) -> str:
    """Add two numbers and return the sum as text."""
    return str(a + b)


@server.tool()
def py_fail(message: str) -> str:
    """Always fail: the result has isError true and carries `message`."""
    raise ToolError(message)


@server.tool()
def py_image() -> list:
    """Return a tiny PNG image block followed by a text block."""
    return [Image(data=TINY_PNG, format="png"), "a 1x1 PNG image"]


def main() -> None:
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
    elif transport in ("sse", "streamable-http") and len(sys.argv) > 2:
        server.run(transport, host="127.0.0.1", port=int(sys.argv[2]))
    else:
        sys.exit("usage: python_server.py stdio | sse PORT | streamable-http PORT")


if __name__ == "__main__":
    main()
