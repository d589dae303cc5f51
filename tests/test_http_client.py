"""driftlab.harness.lab.services.http_client: a connection per request, TCP or a unix socket."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from driftlab.harness.lab.services.http_client import caused_by, http_client
from driftlab.harness.lab.services.ports import free_port


class Answer(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive: a client with a pool would reuse its connection."""

    protocol_version = "HTTP/1.1"
    connections: ClassVar[list[object]] = []

    def setup(self) -> None:
        super().setup()
        self.connections.append(self.connection)

    def do_GET(self) -> None:
        body = b'{"path": "%s"}' % self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


class UnixHttpServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serving(server: socketserver.BaseServer) -> Iterator[socketserver.BaseServer]:
    Answer.connections = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def tcp() -> Iterator[socketserver.BaseServer]:
    yield from serving(ThreadingHTTPServer(("127.0.0.1", 0), Answer))


@pytest.fixture
def unix(tmp_path: Path) -> Iterator[socketserver.BaseServer]:
    yield from serving(UnixHttpServer(str(tmp_path / "api.sock"), Answer))


def test_each_request_has_a_connection_of_its_own(tcp: ThreadingHTTPServer) -> None:
    host, port = tcp.server_address[:2]
    with http_client(5, base_url=f"http://{host!s}:{port}") as http:
        assert http.get("/a").json() == {"path": "/a"}
        assert http.get("/b").json() == {"path": "/b"}
    assert len(Answer.connections) == 2


def test_over_a_unix_socket(unix: socketserver.UnixStreamServer) -> None:
    with http_client(5, socket=Path(str(unix.server_address)), base_url="http://api") as http:
        assert http.get("/proxies/app-%3Epg").json() == {"path": "/proxies/app-%3Epg"}


def test_a_refused_connection_is_told_apart(tmp_path: Path) -> None:
    with http_client(5) as http, pytest.raises(httpx.ConnectError) as refused:
        http.get(f"http://127.0.0.1:{free_port()}/")
    assert caused_by(refused.value, (ConnectionRefusedError,))
    assert not caused_by(refused.value, (ConnectionResetError, TimeoutError))
    with (
        http_client(5, socket=tmp_path / "none.sock") as http,
        pytest.raises(httpx.ConnectError) as missing,
    ):
        http.get("http://api/")
    assert caused_by(missing.value, (FileNotFoundError,))
    assert not caused_by(missing.value, (ConnectionRefusedError,))
