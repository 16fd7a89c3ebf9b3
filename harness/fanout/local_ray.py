"""A Ray cluster on this machine, every server bound to 127.0.0.1, for `--on ray` without an
address and for the tests.

Ray 2.60 resolves a node address of 127.0.0.1 to the machine's own address (its
`resolve_ip_for_localhost`), and its GCS, raylets and workers then listen on every interface,
its runtime-env agent and client server on the machine's address. With
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 it keeps the loopback address, and every server it starts
binds 127.0.0.1 (measured with `ss -ltn` here: none outside loopback). That variable is set
for this process and its children before Ray is imported, and `loopback_env` gives it to
anyone who starts Ray nodes of their own the same way.

The cluster is Ray's own multi-node utility (`ray.cluster_utils.Cluster`): a head and N-1 more
nodes, each its own raylet on 127.0.0.1, in a temporary folder of ours, shut down with the
cluster (and by Ray's reaper if this process dies; its folder then by `pschaos clean`). Ray
records the newest cluster's address in /tmp/ray/ray_current_cluster, where a plain `ray.init()`
finds it; it is put back as it was (two local clusters at once share that file: the later one's
end restores what the earlier one found).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pschaos.harness.errors import HarnessError
from pschaos.harness.fanout.leftovers import CLUSTER_PREFIX, claim

LOOPBACK_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",   # keep 127.0.0.1 (see the module docstring)
    "RAY_USAGE_STATS_ENABLED": "0",             # no usage report (nothing leaves this machine)
    # a worker that exits SIGKILLs its children: a run killed so leaves its cluster running; ours
    # get SIGINT when their worker dies (PR_SET_PDEATHSIG) and tear it down themselves
    "RAY_kill_child_processes_on_worker_exit": "0",
}
ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")


def loopback_env() -> dict[str, str]:
    """The environment that keeps Ray's servers on 127.0.0.1."""
    return dict(LOOPBACK_ENV)


def import_ray() -> Any:
    """Ray, with the loopback environment set first; a clear error when it is not installed. Ray
    reads the variable once, when it is first imported: where something imported it before us,
    the constant it set is corrected too, or `ray.init(address="127.0.0.1:PORT")` would dial the
    machine's address, where nothing of ours listens."""
    os.environ.update(LOOPBACK_ENV)
    try:
        import ray
        from ray._private import ray_constants
    except ImportError:
        raise HarnessError("--on ray needs Ray, which is not installed: pip install 'pschaos[ray]' (ray 2.60)") from None
    ray_constants.ENABLE_RAY_CLUSTER = False
    return ray


class LocalRay:
    """`nodes` Ray nodes on this machine (a head and nodes-1 more), `cpus` CPUs each, on 127.0.0.1.
    `with LocalRay(2) as cluster:` connects this process as the driver and shuts all down after."""

    def __init__(self, nodes: int = 2, cpus: int = 1, connect: bool = True,
                 node_env: dict[int, dict[str, str]] | None = None, head_cpus: int | None = None) -> None:
        if nodes < 1 or cpus < 1:
            raise ValueError(f"a local Ray cluster needs at least 1 node and 1 CPU a node (asked {nodes}, {cpus})")
        if head_cpus is not None and (head_cpus < 0 or (head_cpus == 0 and nodes < 2)):
            raise ValueError(f"head_cpus={head_cpus}: at least 0, and a head of no CPU needs another node to run on")
        self.nodes_wanted, self.cpus, self.connect_driver = nodes, cpus, connect
        self.head_cpus = cpus if head_cpus is None else head_cpus      # 0: a head that runs no task, as clusters keep theirs
        self.node_env = node_env or {}       # node index (0: the head) -> environment its raylet and tasks get
        self.cluster: Any = None
        self.workers: list[Any] = []
        self.temp = ""
        self.kept_address: str | None = None
        self.made_dir = False

    def _node_args(self, index: int = 0) -> dict:
        env = {"env_vars": dict(self.node_env[index])} if self.node_env.get(index) else {}
        return {"node_ip_address": "127.0.0.1", "num_cpus": self.head_cpus if index == 0 else self.cpus,
                "include_dashboard": False,
                "object_store_memory": 100 * 1024 * 1024, "temp_dir": self.temp, **env}

    def start(self) -> "LocalRay":
        ray = import_ray()
        from ray.cluster_utils import Cluster

        self.kept_address = ADDRESS_FILE.read_text() if ADDRESS_FILE.exists() else None
        self.made_dir = not ADDRESS_FILE.parent.exists()
        ADDRESS_FILE.parent.mkdir(parents=True, exist_ok=True)     # Ray writes its address file there
        self.temp = tempfile.mkdtemp(prefix=CLUSTER_PREFIX)
        claim(Path(self.temp), os.getpid())      # a driver killed outright: `pschaos clean` removes the folder
        try:
            self.cluster = Cluster()             # held before the head starts: a failure after it is shut down
            self.cluster.add_node(**self._node_args())
            for i in range(1, self.nodes_wanted):
                self.workers.append(self.cluster.add_node(**self._node_args(i)))
            if self.connect_driver:
                ray.init(address=self.cluster.address, log_to_driver=False, configure_logging=False)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def address(self) -> str:
        return self.cluster.address

    def stop(self) -> None:
        """Disconnect, shut every node down, remove our folder, put Ray's address file back."""
        ray = import_ray()
        try:
            # always: a driver whose ray.init a Ctrl-C cut short is not initialized, yet holds the
            # head's socket, and Ray refuses to remove a node a driver holds (seen: a soak's Ctrl-C
            # during its local cluster's start raised ValueError from the teardown, rc 139)
            ray.shutdown()
            if self.cluster is not None:
                try:
                    self.cluster.shutdown()
                except ValueError:         # the refusal let go of the driver first: once more
                    self.cluster.shutdown()
        finally:
            self.cluster = None
            self._tidy()

    def _tidy(self) -> None:
        """Remove our folder; Ray's last processes may still write into it for a moment after the
        shutdown (CI, fresh clone of b03c78c: a removal that ignored errors left it), so retry,
        bounded."""
        end = time.monotonic() + 15.0
        while self.temp and Path(self.temp).exists():
            shutil.rmtree(self.temp, ignore_errors=True)
            if not Path(self.temp).exists() or time.monotonic() > end:
                break
            time.sleep(0.2)
        self.temp = ""
        try:
            if self.kept_address is not None:
                ADDRESS_FILE.write_text(self.kept_address)
            else:
                ADDRESS_FILE.unlink(missing_ok=True)
            if self.made_dir:
                ADDRESS_FILE.parent.rmdir()          # only if we made it and it is empty again
        except OSError:
            pass

    def __enter__(self) -> "LocalRay":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
