"""A stand-in dcgm-exporter: a /metrics endpoint on 127.0.0.1 serving the newest body the test
set, recording each request path, stopped when the test ends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serve_metrics(bodies: list[bytes], seen: list[str]) -> Iterator[str]:
    """Yields the base URL (``http://127.0.0.1:PORT``); GET /metrics answers ``bodies[-1]``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path != "/metrics":
                self.send_error(404, "Not Found")
                return
            body = bodies[-1]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
