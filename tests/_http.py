"""A local HTTP server on 127.0.0.1 for download tests: normal, truncated, trickling and stalled
responses, each bounded in time so no test can hang."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_SECONDS = 20.0  # a slow response never lasts longer than this, client or not


@dataclass(frozen=True)
class Route:
    body: bytes
    mode: str = "ok"  # ok | truncate | trickle | stall_headers | status | bogus_length
    status: int = 200
    interval: float = 0.2  # trickle / stall_headers: seconds between single bytes


class _Handler(BaseHTTPRequestHandler):
    routes: dict[str, Route] = {}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
        route = self.routes.get(self.path)
        if route is None:
            self.send_error(404, "not found")
            return
        # the client giving up mid-response is what the slow routes test
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._serve(route)

    def _serve(self, route: Route) -> None:
        t0 = time.monotonic()
        if route.mode == "stall_headers":
            for byte in b"HTTP/1.1 200 OK\r\n":
                if time.monotonic() - t0 > MAX_SECONDS:
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(route.interval)
            return
        if route.mode == "status":
            self.send_error(route.status, "as configured")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        bogus = route.mode == "bogus_length"
        self.send_header("Content-Length", "lots" if bogus else str(len(route.body)))
        self.end_headers()
        if bogus:
            self.wfile.write(route.body)
            self.close_connection = True
        elif route.mode == "ok":
            self.wfile.write(route.body)
        elif route.mode == "truncate":
            self.wfile.write(route.body[: len(route.body) // 5])
            self.wfile.flush()
            self.close_connection = True
        elif route.mode == "trickle":
            for i in range(len(route.body)):
                if time.monotonic() - t0 > MAX_SECONDS:
                    return
                self.wfile.write(route.body[i : i + 1])
                self.wfile.flush()
                time.sleep(route.interval)
        else:
            raise ValueError(route.mode)


@contextlib.contextmanager
def serve(routes: dict[str, Route]) -> Iterator[str]:
    """Serve `routes` (path -> Route); yield the base URL `http://127.0.0.1:<port>`."""
    handler = type("Handler", (_Handler,), {"routes": dict(routes)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
