"""A private etcd server for one run, on free loopback ports, with its data in the run folder."""
from __future__ import annotations

from pathlib import Path

from pschaos.psnodes.etcd import Etcd

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.ports import free_ports
from pschaos.harness.machinery.procs import Proc, Signals, Spawn, wait_until
from pschaos.harness.machinery.tools import need


class EtcdServer:
    def __init__(self, run_dir: Path, run_id: str, owner: int | None = None, detach: bool = False,
                 spawn: Spawn | None = None) -> None:
        self.run_dir, self.run_id, self.owner, self.detach = run_dir, run_id, owner, detach
        self.client_port, self.peer_port = free_ports(2)
        self.proc: Signals | None = None
        # how the program is started: a local process, or a container (harness/backends/docker/backend.py)
        self.spawn: Spawn = spawn or (lambda name, argv, log: Proc(name, argv, log, run_id, owner, detach))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def start(self, timeout: float = 15.0) -> None:
        exe = need("etcd")
        c, p = f"http://127.0.0.1:{self.client_port}", f"http://127.0.0.1:{self.peer_port}"
        argv = [exe, "--name", "etcd", "--data-dir", str(self.run_dir / "etcd-data"),
                "--listen-client-urls", c, "--advertise-client-urls", c,
                "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                "--initial-cluster", f"etcd={p}", "--heartbeat-interval", "50", "--election-timeout", "500",
                "--log-level", "warn", "--logger", "zap"]
        self.proc = self.spawn("etcd", argv, self.run_dir / "logs" / "etcd.log")
        client = Etcd(self.url, timeout=0.5)
        if not wait_until(client.healthy, timeout):
            self.stop()
            raise HarnessError(f"etcd did not become healthy on {self.url} in {timeout}s; "
                               f"see {self.run_dir / 'logs' / 'etcd.log'}")

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is not None:
            self.proc.stop(timeout)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
