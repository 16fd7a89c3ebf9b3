"""The run's own Toxiproxy server: started by the harness, seeded, on a free loopback port."""
from __future__ import annotations

from pathlib import Path

from pschaos.netfaults.toxiproxy import ToxiproxyClient, wait_healthy

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.ports import free_ports
from pschaos.harness.machinery.procs import Proc, Signals, Spawn
from pschaos.harness.machinery.tools import need


class ToxiproxyServer:
    def __init__(self, run_dir: Path, run_id: str, seed: int, owner: int | None = None, detach: bool = False,
                 spawn: Spawn | None = None) -> None:
        self.run_dir, self.run_id, self.seed, self.owner, self.detach = run_dir, run_id, seed, owner, detach
        self.port = free_ports(1)[0]
        self.proc: Signals | None = None
        self.spawn: Spawn = spawn or (lambda name, argv, log: Proc(name, argv, log, run_id, owner, detach))

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> ToxiproxyClient:
        exe = need("toxiproxy-server")
        self.proc = self.spawn("toxiproxy", [exe, "-host", "127.0.0.1", "-port", str(self.port), "-seed",
                                             str(self.seed)], self.run_dir / "logs" / "toxiproxy.log")
        client = ToxiproxyClient(self.api)
        if not wait_healthy(client, timeout):
            self.stop()
            raise HarnessError(f"toxiproxy did not answer on {self.api} in {timeout}s; see "
                               f"{self.run_dir / 'logs' / 'toxiproxy.log'}")
        return client

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc is not None:
            self.proc.stop(timeout)
