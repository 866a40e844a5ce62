"""An OpenAI-compatible chat model on loopback that fails on request, for turns that fail.

`POST /v1/chat/completions` (streamed, as turnscope asks) answers by the last user line:
  contains "http 500"  -> HTTP 500 with an OpenAI error body, every time;
  contains "cut"       -> two pieces ("We open"), then the connection closes at once,
                          mid-stream (no finish_reason, no [DONE]);
  anything else        -> "You said: LINE", streamed word by word.
Python standard library only; every request is counted in `requests`.
"""

import http.server
import json
import threading
import time


class FaultyModel:
    def __init__(self):
        self.requests = 0
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                data = json.dumps({"object": "list", "data": [{"id": "faulty", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                model.requests += 1
                users = [m for m in body.get("messages", []) if m.get("role") == "user"]
                line = users[-1].get("content", "") if users else ""
                if isinstance(line, list):
                    line = "".join(p.get("text", "") for p in line)
                if "http 500" in line.lower():
                    data = json.dumps({"error": {"message": "the model server broke (scripted)", "type": "server_error"}}).encode()
                    self.send_response(500)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                cut = "cut" in line.lower()
                words = ["We", " open"] if cut else ("You said: " + line.strip()).split(" ")
                for i, word in enumerate(words):
                    piece = word if i == 0 or cut else " " + word
                    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "faulty",
                             "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.02)
                if cut:
                    # The connection closes right after the pieces, mid-answer: the pieces
                    # and the break reach turnscope together.
                    return
                end = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "faulty",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
