"""The Docker backend: etcd, Toxiproxy, every shard copy and every worker as a container.

It is the process backend with containers for processes: the same config, argv, event files,
link proxies and nftables rules (containers share the host's network namespace, loopback only:
no bridge exists, every server binds 127.0.0.1), the same observation and the same teardown
order. What differs lives in harness/backends/docker/: the engine connection, the image (self-contained by default, plan.py), the
container handles (signals map to the engine: kill, `docker stop -t`, pause through the cgroup
freezer) and the data volumes. On top it offers what only containers have (CONTAINER_KINDS):
CPU quota, memory limit with the kernel's OOM kill, and a full disk.

Every container and volume carries the run id as a label: teardown removes them all (also after
Ctrl-C: the runner's `finally`), and `pschaos clean` removes what a killed run left.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil

from pschaos.harness.backends.process.backend import ProcessBackend
from pschaos.harness.backends.docker import engine
from pschaos.harness.backends.docker.containers import ContainerHandle, ContainerLauncher
from pschaos.harness.backends.docker.gpu import worker_requests
from pschaos.harness.backends.docker.plan import chosen, plan
from pschaos.harness.backends.docker.volumes import DataVolumes
from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.etcd_server import EtcdServer
from pschaos.harness.faults.container import CONTAINER_KINDS
from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.machinery.toxiproxy_server import ToxiproxyServer


class DockerBackend(ProcessBackend):
    name = "docker"
    container_kinds = CONTAINER_KINDS

    def __init__(self, spec: ClusterSpec, run_dir: Path, run_id: str, seed: int, owner: int | None = None,
                 detach: bool = False, tables: dict[str, int] | None = None, proxied: bool = False,
                 data_volumes: bool = False) -> None:
        run_dir = Path(run_dir).resolve()        # containers see the run folder at the same absolute path
        why = engine.network_rule_violation()           # before anything is started or connected
        if why:
            raise HarnessError(f"--backend docker refused: {why}")
        client = engine.client()
        why = engine.network_rule_violation(client)
        if why:
            client.close()
            raise HarnessError(f"--backend docker refused: {why}")
        super().__init__(spec, run_dir, run_id, seed, owner, detach, tables, proxied, zygote=False)
        self.engine = client
        info = self.engine.info()
        self.device, self.device_requests = worker_requests(spec.device, spec.gpus, info)
        owner_pid = owner if owner is not None else os.getpid()
        self.image = plan(self.engine, spec.image)
        self.launcher = ContainerLauncher(self.engine, self.image, run_dir, run_id, owner_pid,
                                          extra=self._create_options, before_remove=self._before_remove)
        self.etcd_server = EtcdServer(run_dir, run_id, owner, detach, spawn=self.launcher.run)
        if proxied:
            self.toxiproxy = ToxiproxyServer(run_dir, run_id, seed, owner, detach, spawn=self.launcher.run)
        nodes = [f"shard-{i}/{r}" for i in range(spec.shards) for r in range(spec.copies)]
        self.volumes = DataVolumes(self.engine, self.launcher, nodes, lambda n: Path(self.cfg.data_dir(n)),
                                   run_dir / "logs") if data_volumes else None

    # --------------------------------------------------------- containers
    def _create_options(self, name: str) -> dict:
        """Per-container create options beyond the common ones (harness/backends/docker/containers.py)."""
        opts: dict = {}
        if name.startswith("worker-") and self.device_requests:
            opts["device_requests"] = [_request(r) for r in self.device_requests]
        if self.volumes is not None:
            opts["volumes"] = self.volumes.mounts(name)
        return opts

    def _before_remove(self) -> None:
        if self.volumes is not None and self.volumes.ready:
            self.volumes.save()

    def worker_device(self) -> str:
        return self.device

    def run_facts(self) -> dict:
        """What the run-start event records of this backend: the image every container ran."""
        try:
            image_id = self.engine.images.get(self.image.tag).id
        except Exception:  # noqa: BLE001 - the record says it could not tell, the run goes on
            image_id = None
        mode = "host" if self.image.bind_host else (chosen(self.spec.image) or "self-contained")
        return {"image": {"tag": self.image.tag, "id": image_id, "chosen": mode}}

    def start_nodes(self, names: list[str]) -> None:
        """All at once: creating a container costs the engine 0.2-0.5 s, and the copies wait for
        each other's heartbeats (one after another, six copies took 2-3 s before the first step)."""
        self._parallel(self.start_node, names)

    def start_workers(self, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        self._parallel(lambda w: self.start_worker(w, steps, duration, step_delay),
                       [f"worker-{j}" for j in range(self.spec.workers)])

    @staticmethod
    def _parallel(fn, names: list[str]) -> None:
        """`fn(name)` for each name in threads; the first error is raised (after all finished)."""
        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            for f in [pool.submit(fn, n) for n in names]:
                f.result()

    def start_node(self, name: str) -> None:
        if self.volumes is not None and not self.closing:
            self.volumes.ensure()               # the config (and so each data path) exists by now
        super().start_node(name)

    def handle(self, name: str) -> ContainerHandle:
        h = self.etcd_server.proc if name == "etcd" else self.procs.get(name)
        if not isinstance(h, ContainerHandle):
            raise HarnessError(f"{name}: no such container in this run")
        return h

    def data_path(self, name: str) -> Path:
        return self.volumes.host_path(name) if self.volumes is not None else super().data_path(name)

    def wipe_data(self, name: str) -> None:
        if self.volumes is None:
            return super().wipe_data(name)
        self.volumes.wipe(name)

    def checkpoint_scan(self) -> list[dict]:
        """The work folder as on the process backend, plus each copy's data volume."""
        out = super().checkpoint_scan()
        if self.volumes is not None and self.volumes.ready:
            work = Path(self.cfg.workdir)
            for n in self.nodes():
                d = Path(self.cfg.data_dir(n)).relative_to(work)
                out += [dict(v, dir=str(d / v["dir"]) if v["dir"] != "." else str(d))
                        for v in self.scan_tree(self.volumes.host_path(n), self.volumes.host_path(n))]
        return out

    def pids(self) -> dict[str, int]:
        return {n: h.pid for n, h in {**self.procs, "etcd": self.etcd_server.proc}.items()
                if h is not None and h.alive()}

    # ---------------------------------------------------- container-only faults
    def limit_cpu(self, name: str, cpus: float | None) -> int:
        """A CPU quota on a running container (`cpus` CPUs' worth of time per 100 ms), or none
        (-1). Returns the quota in force, read back from the engine: an update the engine answered
        with `Warnings` (no CPU controller, say) or that left another quota is a HarnessError,
        so a throttle that did not happen makes the run unknown instead of a straggler-free pass."""
        period = 100_000
        quota = -1 if cpus is None else int(round(cpus * period))
        if cpus is not None and not 1000 <= quota:
            raise HarnessError(f"cpu-throttle {name}: params.cpus={cpus} is a quota of {quota} us per "
                               f"{period} us; the kernel takes at least 1000 us (cpus >= 0.01)")
        h = self.handle(name)
        answer = h.container.update(cpu_period=period, cpu_quota=quota) or {}
        if answer.get("Warnings"):
            raise HarnessError(f"cpu-throttle {name}: the engine did not apply a CPU quota of {quota} us: "
                               f"{'; '.join(answer['Warnings'])} (does dockerd have the cpu cgroup controller?)")
        h.container.reload()
        got = h.container.attrs["HostConfig"].get("CpuQuota")
        if got != quota:
            raise HarnessError(f"cpu-throttle {name}: asked the engine for a CPU quota of {quota} us per "
                               f"{period} us, it reports {got!r}: the container is not throttled as written")
        return got

    def oom_kill(self, name: str, headroom_mb: int, timeout: float = 15.0) -> dict:
        """A memory limit just above what the container uses, then memory pressure inside it: the
        kernel's OOM killer takes the node (its oom_score_adj is raised first, so it is the one the
        kernel picks over the allocator that pushed it). Returns the engine's verdict."""
        need = (2 * headroom_mb + 64) << 20            # what the hog below allocates at most
        free = psutil.virtual_memory().available
        if need > free // 2:
            raise HarnessError(f"memory-limit {name}: params.headroom_mb={headroom_mb} needs about {need >> 20} MiB "
                               f"of pressure and this machine has {free >> 20} MiB available; use a smaller "
                               "headroom_mb (16 is plenty), or the host's OOM killer could pick another process")
        h = self.handle(name)
        used = h.container.stats(stream=False, one_shot=True)["memory_stats"]["usage"]   # one_shot: no 1 s sample wait
        limit = int(used + headroom_mb * 2**20)
        with open(f"/proc/{h.pid}/oom_score_adj", "w") as f:
            f.write("1000")
        h.container.update(mem_limit=limit, memswap_limit=limit)
        hog = f"b = []\nfor _ in range({2 * headroom_mb + 64}): b.append(bytearray(1 << 20))"
        h.container.exec_run(self.image.command([sys.executable, "-c", hog]), detach=True)   # the image's python3
        if not h._wait_exit(timeout):
            raise HarnessError(f"memory-limit {name}: not OOM-killed within {timeout}s of a {limit >> 20} MiB limit")
        st = h.state()
        if not st.get("OOMKilled"):
            raise HarnessError(f"memory-limit {name}: exited ({st.get('ExitCode')}) but the engine does not "
                               "report an OOM kill")
        return {"reason": "OOMKilled", "exit_code": st.get("ExitCode"), "limit_mb": limit >> 20,
                "used_mb": used >> 20}

    def unlimit_memory(self, name: str) -> None:
        """Lift the limit (cgroup v1 cannot drop one: it is set to the machine's memory)."""
        total = psutil.virtual_memory().total
        self.handle(name).container.update(mem_limit=total, memswap_limit=-1)

    def fill_disk(self, name: str) -> int:
        if self.volumes is None or name not in self.volumes.nodes:
            raise HarnessError(f"disk-full {name}: only a shard copy's data volume can be filled "
                               "(the run was started without data volumes, or the target is no shard copy)")
        return self.volumes.fill(name)

    def free_disk(self, name: str) -> None:
        if self.volumes is not None and name in self.volumes.nodes:
            self.volumes.free(name)


def _request(r: dict):
    """The SDK's DeviceRequest from the API dict harness/backends/docker/gpu.py builds (unit-tested there)."""
    docker = engine.sdk()
    return docker.types.DeviceRequest(driver=r["Driver"], count=r.get("Count", 0), device_ids=r.get("DeviceIDs"),
                                      capabilities=r["Capabilities"])
