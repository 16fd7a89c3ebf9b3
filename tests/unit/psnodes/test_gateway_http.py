"""GatewayHTTP, the etcd client's HTTP: a connection is kept and reused, one the server closed
while idle is never reused, a POST is never sent twice, and failures are named as the twin's
etcd and the logs name them (ConnectionError, ReadTimeout, InvalidURL). A local HTTP server
stands in for the gateway (the etcd-facing integration tests run the real one)."""
from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pschaos.psnodes.etcd import Etcd, EtcdError
from pschaos.psnodes.gateway_http import GatewayError, GatewayHTTP


class Gateway(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.posts: list[tuple[str, bytes, int]] = []     # path, body, client port
        self.mode = "ok"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        srv: Gateway = self.server          # type: ignore[assignment]
        srv.posts.append((self.path, body, self.client_address[1]))
        if srv.mode == "hang":
            time.sleep(1.0)
        if srv.mode == "drop":                # read the request, close without an answer
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        out = b"<html>not etcd</html>" if srv.mode == "html" else b'{"kvs": []}'
        if srv.mode == "close-after":
            self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture
def gw():
    g = Gateway()
    yield g
    g.shutdown()
    g.server_close()


def test_calls_reuse_one_connection_and_post_the_json(gw):
    e = Etcd(gw.url + "/", timeout=1.0)
    for _ in range(5):
        assert e.get("/k") is None
    assert [p for p, _, _ in gw.posts] == ["/v3/kv/range"] * 5
    assert len({port for _, _, port in gw.posts}) == 1
    assert gw.posts[0][1] == b'{"key": "L2s="}'
    conn = e.http._idle[0]            # no Nagle: the body never waits for the ACK of the headers
    assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    e.close()


def test_a_connection_the_server_closed_while_idle_is_not_reused(gw):
    h = GatewayHTTP(gw.url)
    gw.mode = "close-after"            # answers as keep-alive, then closes the connection
    assert h.post("/a", b"{}", 1.0)[0] == 200
    assert len(h._idle) == 1
    time.sleep(0.2)
    gw.mode = "ok"
    assert h.post("/b", b"{}", 1.0)[0] == 200
    assert len(gw.posts) == 2 and gw.posts[0][2] != gw.posts[1][2]


def test_a_post_whose_answer_never_came_is_not_sent_again(gw):
    gw.mode = "drop"
    with pytest.raises(EtcdError, match="unreachable: ConnectionError"):
        Etcd(gw.url, timeout=1.0).cas("/k", 0, "v")
    assert len(gw.posts) == 1


def test_a_slow_answer_is_a_read_timeout_and_the_next_call_works(gw):
    e = Etcd(gw.url, timeout=0.2)
    gw.mode = "hang"
    t = time.monotonic()
    with pytest.raises(EtcdError, match="unreachable: ReadTimeout"):
        e.get("/k")
    assert time.monotonic() - t < 0.9
    gw.mode = "ok"
    assert e.get("/k") is None


def test_unreachable_invalid_and_not_json_are_named():
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    with pytest.raises(EtcdError, match=f"etcd at http://127.0.0.1:{port} unreachable: ConnectionError"):
        Etcd(f"http://127.0.0.1:{port}").get("/k")
    with pytest.raises(EtcdError, match="unreachable: InvalidURL"):
        Etcd(f"127.0.0.1:{port}").get("/k")
    with pytest.raises(GatewayError):
        GatewayHTTP("ftp://x").post("/", b"", 1.0)


def test_an_answer_that_is_not_json_names_the_fix(gw):
    gw.mode = "html"
    with pytest.raises(EtcdError, match="answered HTTP 200 '<html>not etcd</html>', not etcd's JSON gateway"):
        Etcd(gw.url).get("/k")
