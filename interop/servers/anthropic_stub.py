"""A scripted Anthropic Messages API on loopback, for driving the real Claude Code CLI.

Claude Code (ANTHROPIC_BASE_URL pointed here) sends its whole conversation with every
request; the stub answers the main loop's requests (those offering tools) from a script, by
how many assistant messages the conversation already has, so a retried request gets the same
answer. Each step is one of:
  {"tool": NAME, "input": DICT or CALLABLE(stub) -> DICT}   a tool_use block;
  {"text": TEXT}                                              a final text answer.
In a JSON script, an input value "$HANDLE" is the handle the latest `start` gave.
Past the script's end it answers "Done.". Requests without tools (Claude Code's own side
requests) get a short text. Every request is recorded (path, headers, parsed body), so tests
can assert what the model received in each `tool_result`.

Answers stream as the Messages API does (`message_start`, `content_block_start`/`_delta`/
`_stop`, `message_delta`, `message_stop`) when the request asks for `stream`, else as one
JSON message. Python standard library only.

Standalone (for an interactive Claude Code, e.g. in tmux next to the console):
  python anthropic_stub.py PORT SCRIPT.json     # serves on 127.0.0.1:PORT until interrupted
"""

import http.server
import itertools
import json
import re
import threading

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def block_text(block) -> str:
    """The text of a content block or of a tool_result's content (a string or blocks)."""
    content = block.get("content", block.get("text", ""))
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


class AnthropicStub:
    """The stub server on 127.0.0.1:`port` (0: any free port). `script` is the list of steps
    (see the module doc)."""

    def __init__(self, script, model="claude-stub", port=0):
        self.script = list(script)
        self.model = model
        self.requests = []
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                with stub.lock:
                    stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if not self.path.split("?")[0].endswith("/v1/messages"):
                    # count_tokens and anything else: a plausible, small answer.
                    self.answer_json(200, {"input_tokens": 100})
                    return
                blocks, stop = stub.answer(body)
                if body.get("stream"):
                    self.stream(body, blocks, stop)
                else:
                    self.answer_json(200, stub.message(body, blocks, stop))

            def do_GET(self):
                with stub.lock:
                    stub.requests.append({"path": self.path, "headers": dict(self.headers), "body": None})
                self.answer_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "stub"}})

            def answer_json(self, status, value):
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def stream(self, body, blocks, stop):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True

                def event(kind, data):
                    data["type"] = kind
                    self.wfile.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

                message = stub.message(body, [], None)
                event("message_start", {"message": message})
                for index, block in enumerate(blocks):
                    if block["type"] == "text":
                        event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                        event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": block["text"]}})
                    else:
                        start = dict(block, input={})
                        event("content_block_start", {"index": index, "content_block": start})
                        event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
                    event("content_block_stop", {"index": index})
                event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 12}})
                event("message_stop", {})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def message(self, body, blocks, stop):
        return {
            "id": f"msg_stub_{next(self.ids)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", self.model),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }

    def answer(self, body):
        """The blocks and stop reason for one Messages request."""
        if not body.get("tools"):
            return [{"type": "text", "text": "OK."}], "end_turn"
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        if done >= len(self.script):
            return [{"type": "text", "text": "Done."}], "end_turn"
        step = self.script[done]
        if "text" in step:
            return [{"type": "text", "text": step["text"]}], "end_turn"
        tool_input = step.get("input", {})
        if callable(tool_input):
            tool_input = tool_input(self)
        elif isinstance(tool_input, dict):
            # "$HANDLE" stands for the handle the latest start gave (for scripts in JSON).
            tool_input = {k: self.latest_handle() if v == "$HANDLE" else v for k, v in tool_input.items()}
        block = {"type": "tool_use", "id": f"toolu_stub_{done:02d}", "name": step["tool"], "input": tool_input}
        return [block], "tool_use"

    # ---- what the model received ----

    def main_requests(self):
        """The main loop's Messages requests (those offering tools), in order."""
        with self.lock:
            return [r["body"] for r in self.requests if r["body"] and r["body"].get("tools") and "messages" in r["body"]]

    def tool_results(self):
        """Every tool_result the model received, by tool_use id: {"text", "is_error", "raw"}.
        Taken from the last main request (it carries the whole conversation)."""
        requests = self.main_requests()
        if not requests:
            return {}
        results = {}
        for m in requests[-1]["messages"]:
            if m.get("role") != "user" or isinstance(m.get("content"), str):
                continue
            for block in m["content"]:
                if block.get("type") == "tool_result":
                    results[block["tool_use_id"]] = {
                        "text": block_text(block),
                        "is_error": bool(block.get("is_error")),
                        "raw": block,
                    }
        return results

    def result_of(self, step: int):
        """The tool_result answering script step `step` (its tool_use id is fixed by the step)."""
        return self.tool_results().get(f"toolu_stub_{step:02d}")

    def latest_handle(self) -> str:
        """The handle in the latest tool_result that names one (start's text: `Handle: …`)."""
        for result in reversed(list(self.tool_results().values())):
            found = re.search(r"Handle: (" + UUID.pattern + ")", result["text"])
            if found:
                return found.group(1)
        raise AssertionError(f"no tool_result named a handle: {self.tool_results()}")


if __name__ == "__main__":
    import sys

    port, script_file = int(sys.argv[1]), sys.argv[2]
    with open(script_file) as f:
        steps = json.load(f)
    stub = AnthropicStub(steps, port=port)
    print(f"anthropic stub on http://127.0.0.1:{port} ({len(steps)} steps)", flush=True)
    try:
        stub.server.serve_forever()
    except KeyboardInterrupt:
        pass
