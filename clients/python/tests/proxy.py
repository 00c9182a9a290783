"""A one-upstream HTTP proxy that sees every request and can lose the
answers to chosen ones: it forwards them (so the cluster applies them),
then drops the connection, answers ``outcome_unknown``, or hangs until
the client's request times out. This is how a
test gets an acquire whose outcome the client cannot know, or counts a
client's long-poll slices."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, List, Tuple

import httpx


class LossyProxy:
    """Listens on a free loopback port; ``url`` is its endpoint."""

    def __init__(self, upstream: str, lose: Callable[[str], bool], mode: str) -> None:
        assert mode in ("drop", "outcome_unknown", "hang")
        self.upstream = upstream
        self.lose = lose
        self.mode = mode
        self.lost: List[Tuple[str, int]] = []
        """(path, the upstream's status) of every answer withheld."""
        self.requests: List[str] = []
        """The path of every request received, in order."""
        self._closing = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy._handle(self)

            def do_POST(self) -> None:
                proxy._handle(self)

            def do_PUT(self) -> None:
                proxy._handle(self)

            def do_DELETE(self) -> None:
                proxy._handle(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        self.requests.append(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        answer = httpx.request(
            request.command,
            self.upstream + request.path,
            content=body,
            headers=headers,
            timeout=30,
            trust_env=False,
        )
        if self.lose(request.path):
            self.lost.append((request.path, answer.status_code))
            if self.mode == "hang":
                self._closing.wait()  # until the test ends; the client times out first
            if self.mode in ("drop", "hang"):
                request.close_connection = True  # no answer at all
                return
            status, payload = 503, b'{"error":"outcome_unknown","message":"answer lost (test proxy)"}'
        else:
            status, payload = answer.status_code, answer.content
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        request.wfile.write(payload)

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
