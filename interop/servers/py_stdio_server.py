"""A stdio MCP server written with the Python `mcp` SDK, for the Xiaozhi bridge interop run.

Run by the bridge as its upstream:

    turnscope bridge xiaozhi --endpoint ws://127.0.0.1:PORT/mcp/?token=T \
        --stdio "python3 interop/servers/py_stdio_server.py"

Tools (deterministic, so a driver can assert exact answers):
- add(a, b) -> the sum as text, e.g. add(2, 3.5) -> "5.5"
- shout(text, times=1) -> text upper-cased and repeated, joined by spaces;
  its argument model is nested (`Style`), so the schema carries a `$defs`/`$ref`
  that the bridge must inline before the endpoint sees it.

Works with the SDK's 1.x (`mcp.server.fastmcp.FastMCP`) and 2.x (`MCPServer`) names.
Logs go to stderr only; stdout carries MCP.
"""

from typing import Optional

from pydantic import BaseModel, Field

try:  # mcp 2.x renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer as FastMCP
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP

mcp = FastMCP("py-interop")


class Style(BaseModel):
    """How to shout."""

    times: int = Field(1, ge=1, le=5, description="How many times to repeat.")
    separator: str = Field(" ", description="What goes between repeats.")


@mcp.tool()
def add(a: float, b: float) -> str:
    """Add two numbers and return the sum as text."""
    total = a + b
    return str(int(total)) if total == int(total) else str(total)


@mcp.tool()
def shout(text: str, style: Optional[Style] = None) -> str:
    """Upper-case `text`, repeated `style.times` times joined by `style.separator`."""
    style = style or Style()
    return style.separator.join([text.upper()] * style.times)


if __name__ == "__main__":
    mcp.run("stdio")
