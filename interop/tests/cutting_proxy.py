"""A loopback HTTP/1.1 proxy that cuts the first `chat` response stream after N progress events.

Every request is forwarded on its own upstream connection (`Connection: close`); the response
bytes are piped back unchanged. The first POST whose JSON-RPC body is a `tools/call` of `chat`
with a non-empty line has its response cut (the client's socket aborted, mid chunked body) once
`cut_after` progress notifications went through. What the proxy saw is kept for assertions.
"""

import asyncio
import json
import threading


class CuttingProxy:
    def __init__(self, upstream_url: str, cut_after: int = 2):
        rest = upstream_url.split("://", 1)[1]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.partition(":")
        self.upstream = (host, int(port))
        self.path = "/" + path
        self.cut_after = cut_after
        self.cuts = 0
        self.resumes = []  # Last-Event-ID values of GETs
        self.statuses = []  # (method, status line) of every response
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def _run(self):
        asyncio.set_event_loop(self._loop)

        async def main():
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()
            async with self._server:
                await self._server.serve_forever()

        try:
            self._loop.run_until_complete(main())
        except (asyncio.CancelledError, RuntimeError):
            pass

    def close(self):
        def stop():
            self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(5)

    async def _handle(self, reader, writer):
        try:
            await self._one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _one(self, reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        request_line, headers = lines[0], [l for l in lines[1:] if l]
        method = request_line.split(" ", 1)[0]
        length = 0
        kept = []
        for h in headers:
            name, _, value = h.partition(":")
            lname = name.strip().lower()
            if lname == "content-length":
                length = int(value.strip())
            if lname == "last-event-id" and method == "GET":
                self.resumes.append(value.strip())
            if lname in ("connection", "keep-alive"):
                continue
            kept.append(h)
        body = await reader.readexactly(length) if length else b""
        cut = False
        if method == "POST" and self.cuts == 0:
            try:
                message = json.loads(body)
                params = message.get("params") or {}
                cut = (
                    message.get("method") == "tools/call"
                    and params.get("name") == "chat"
                    and (params.get("arguments") or {}).get("line")
                )
            except (ValueError, AttributeError):
                cut = False
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        up_writer.write((request_line + "\r\n" + "\r\n".join(kept + ["Connection: close"]) + "\r\n\r\n").encode("latin-1") + body)
        await up_writer.drain()
        progress = 0
        first = True
        try:
            while True:
                chunk = await up_reader.read(65536)
                if not chunk:
                    break
                if first:
                    self.statuses.append((method, chunk.split(b"\r\n", 1)[0].decode("latin-1")))
                    first = False
                writer.write(chunk)
                await writer.drain()
                if cut:
                    progress += chunk.count(b"notifications/progress")
                    if progress >= self.cut_after:
                        self.cuts += 1
                        writer.transport.abort()
                        return
        finally:
            up_writer.close()
        await writer.drain()
