"""netfaults' Toxiproxy client on the toxiproxy-python package: the package's process-global API
is confined, so two runs in one process never send a call to each other's server; every error
status raises (the package lets a 500 pass); the version is parsed from 2.12's JSON."""
from __future__ import annotations

import http.server
import threading

import pytest

from pschaos.harness.machinery.ports import free_ports
from pschaos.harness.machinery.procs import Proc
from pschaos.harness.machinery.tools import find
from pschaos.netfaults.errors import NetFaultError
from pschaos.netfaults.toxiproxy import ToxiproxyClient, wait_healthy


@pytest.fixture
def two_servers(tmp_path):
    exe = find("toxiproxy-server")
    if exe is None:
        pytest.skip("toxiproxy-server is not installed (make install)")
    procs, clients = [], []
    for i, port in enumerate(free_ports(2)):
        procs.append(Proc(f"toxiproxy-{i}", [exe, "-host", "127.0.0.1", "-port", str(port)],
                          tmp_path / f"tp{i}.log", f"test-tp-{i}"))
        clients.append(ToxiproxyClient(f"http://127.0.0.1:{port}"))
    try:
        assert all(wait_healthy(c, 10) for c in clients)
        yield clients
    finally:
        for p in procs:
            p.stop(2)


def test_two_clients_in_one_process_never_cross(two_servers):
    a, b = two_servers
    assert a.version() == "2.12.0"

    def make(c: ToxiproxyClient, tag: str) -> None:
        for i in range(25):
            p = c.create(f"{tag}-{i}", "127.0.0.1:0", "127.0.0.1:9")
            c.add_toxic(p.name, "lat", "latency", {"latency": 5})
    threads = [threading.Thread(target=make, args=(c, t)) for c, t in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(a.proxies()) == sorted(f"a-{i}" for i in range(25))
    assert sorted(b.proxies()) == sorted(f"b-{i}" for i in range(25))
    assert [t["name"] for t in a.toxics("a-3")] == ["lat"]


def test_refusals_raise_naming_what_was_refused(two_servers):
    a, _ = two_servers
    a.create("x", "127.0.0.1:0", "127.0.0.1:9")
    with pytest.raises(NetFaultError, match="ProxyExists.*already exists"):
        a.create("x", "127.0.0.1:0", "127.0.0.1:9")
    with pytest.raises(NetFaultError, match="InvalidToxic.*invalid toxic type"):
        a.add_toxic("x", "t", "no-such-toxic", {})
    a.remove_toxic("x", "never-added")          # healing what is not there is no error


def test_a_server_error_is_not_taken_for_success():
    class Fails(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error":"boom"}')

        def log_message(self, *args):
            pass
    srv = http.server.HTTPServer(("127.0.0.1", 0), Fails)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        c = ToxiproxyClient(f"http://127.0.0.1:{srv.server_port}", timeout=2)
        with pytest.raises(NetFaultError, match="HTTP 500"):
            c.set_enabled("p", False)
    finally:
        srv.shutdown()
