"""A webhook target on 127.0.0.1 for the tests (Alertmanager's receiver, remediate's webhook
action): keeps each POST (headers and JSON body) and answers ``statuses`` in turn, then 200."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    def __init__(self, path: str = "/", statuses: Sequence[int] = ()) -> None:
        self.path = path
        self.posts: list[tuple[dict[str, str], Any]] = []
        self.statuses = list(statuses)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                receiver.posts.append((dict(self.headers), json.loads(self.rfile.read(length))))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.path}"

    @property
    def alerts(self) -> list[dict[str, Any]]:
        """Every alert of every Alertmanager notification received so far."""
        return [alert for _, body in self.posts for alert in body.get("alerts", [])]
