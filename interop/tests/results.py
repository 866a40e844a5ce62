"""What the tests read of an MCP SDK tool result: its text, and the machine-readable records
turnscope puts in `_meta` (read strictly: a record missing there fails the test)."""


def text_of(result) -> str:
    """The result's text blocks, joined."""
    return "".join(b.text for b in result.content if getattr(b, "type", "") == "text")


def turn_of(result) -> dict:
    """The turn record programs read: the result's `_meta["turnscope/turn"]`."""
    return result.meta["turnscope/turn"]
