"""The run's containers: one handle per node, worker, etcd or Toxiproxy, with the same methods as
a process handle (harness/machinery/procs.Signals), so the process backend's start, stop and teardown code
drives containers unchanged.

Signals map to the engine: SIGKILL is `docker kill`, SIGTERM is `docker kill -s TERM` (a stop
with its timeout is `docker stop -t`), SIGSTOP/SIGCONT are `docker pause`/`unpause` (the cgroup
freezer: the whole container stops, not only its first process). A restart starts the same
container again (same name, argv, mounts and limits). Liveness reads the container's first
process through a pidfd (procs.ProcessRef), not the API: the runner polls it every 20 ms.

Containers share the host's PID namespace (pid_mode=host), as they share its network: a node is
then no PID 1 (which would ignore SIGTERM without a handler, unlike the process it stands for),
and each incarnation has its own pid, which the history pairs operations by (a restarted worker
counts its op ids from 1 again; as PID 1 every incarnation would look the same).

Every container carries `pschaos.run=<run id>` and its owner (pid and start time), so teardown
removes exactly its run's containers and `pschaos clean` finds a dead run's (harness/commands/clean.py).
"""
from __future__ import annotations

import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.launcher import Keeper
from pschaos.harness.machinery.procs import ProcessRef, Signals, python_module, start_time, wait_until
from pschaos.harness.backends.docker.engine import LABEL_KIND, LABEL_RUN, sdk
from pschaos.harness.backends.docker.plan import ImagePlan

LABEL_NODE, LABEL_OWNER, LABEL_OWNER_START = "pschaos.node", "pschaos.owner", "pschaos.owner_start"
# 409 answers that mean "already in the state asked for" (the engine's wording since 1.13)
PAUSE_TRIES = 3
_ALREADY = re.compile(r"is not running|is not paused|is already paused|is already in progress", re.I)


def container_name(run_id: str, name: str) -> str:
    """`pschaos-<run id>-shard-0-1`: unique per run, readable in `docker ps`."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", f"pschaos-{run_id}-{name}")


def kind_of(name: str) -> str:
    return name.split("-")[0] if name.startswith(("shard-", "worker-")) else name


class ContainerHandle(Signals):
    """One container, named as the node it runs (`shard-0/1`)."""

    def __init__(self, name: str, container: Any, log: Path) -> None:
        self.name, self.container, self.log_path = name, container, log
        self.paused = False
        self.ref: ProcessRef | None = None
        self.pid = 0
        self._refresh()

    def _refresh(self) -> None:
        """Follow the container's first process (a new one after every start)."""
        self.container.reload()
        st = self.container.attrs["State"]
        pid = int(st.get("Pid") or 0)
        if pid and st.get("Running"):
            t = start_time(pid)
            self.pid, self.ref = pid, (ProcessRef(pid, t) if t is not None else None)
        else:
            self.pid, self.ref = 0, None

    def alive(self) -> bool:
        """Running or paused (a frozen container is alive, as a SIGSTOPped process is)."""
        return self.ref is not None and self.ref.alive()

    def state(self) -> dict:
        """The engine's record of the container (Status, ExitCode, OOMKilled, ...); a container
        already removed (teardown, `pschaos clean`) reads as exited with no code."""
        try:
            self.container.reload()
        except sdk().errors.NotFound:
            return {"Status": "removed", "Running": False, "ExitCode": None}
        return dict(self.container.attrs["State"])

    def _engine(self, call: Callable[..., Any], *args: Any, **kw: Any) -> bool:
        """One engine call on the container; False when the engine says it is already in the state
        asked for (removed, 409 'is not running', 'is not paused', 'is already paused'). A node may
        exit on its own between our liveness check and the call (at a stop's grace deadline, say);
        that is what was wanted, not an error that stops teardown half-way."""
        docker = sdk()
        try:
            call(*args, **kw)
            return True
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as e:
            if e.status_code == 409 and _ALREADY.search(str(e.explanation or e)):
                return False
            raise

    def _send(self, sig: int) -> None:
        if not self.alive():
            return
        if sig == signal.SIGSTOP:
            self._pause()
        elif sig == signal.SIGCONT:
            if self.paused:
                self._engine(self.container.unpause)
        elif sig == signal.SIGKILL:
            if self._engine(self.container.kill):
                self._wait_exit(10)
        else:
            self._engine(self.container.kill, signal=signal.Signals(sig).name)

    def _pause(self) -> None:
        """`docker pause`, tried again when the freezer gave up (runc's "unable to freeze": a task of
        the container was in uninterruptible sleep, e.g. paging in its libraries, for the whole of
        runc's wait; seen once, on the first runs of a freshly built image). Any other error, or a
        third such refusal, propagates: the fault then fails and the run is unknown."""
        docker = sdk()
        for attempt in range(PAUSE_TRIES):
            try:
                self._engine(self.container.pause)
                return
            except docker.errors.APIError as e:
                if "unable to freeze" not in str(e.explanation or e) or attempt == PAUSE_TRIES - 1:
                    raise
                time.sleep(0.05)

    def _wait_exit(self, timeout: float) -> bool:
        """Until the process is gone and the engine calls the container exited (a start before
        that would be refused as 'already running')."""
        ok = wait_until(lambda: not self.alive(), timeout, 0.01)
        if ok:
            self._engine(self.container.wait, timeout=timeout, condition="not-running")
        return ok

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def stop(self, timeout: float = 5.0) -> int | None:
        """`docker stop -t`: SIGTERM, SIGKILL after `timeout` (a paused container is thawed first).
        The engine takes whole seconds: `timeout` is rounded, and at least 1 s."""
        if self.alive():
            if self.paused:
                self.signal(signal.SIGCONT)
            self._engine(self.container.stop, timeout=max(1, int(round(timeout))))
            self._wait_exit(5)
        self.paused = False
        return self.state().get("ExitCode")

    def start(self) -> None:
        """Start the container again; one still frozen (409 'paused') is thawed instead, and a
        container the engine no longer has is a HarnessError naming it (nothing to restart)."""
        docker = sdk()
        try:
            self.container.start()
        except docker.errors.NotFound:
            raise HarnessError(f"{self.name}: its container is gone from the engine (removed by teardown or "
                               "`pschaos clean`?); it cannot be started again") from None
        except docker.errors.APIError as e:
            if not (e.status_code == 409 and "paused" in str(e.explanation or e)):
                raise
            self._engine(self.container.unpause)
        self._refresh()
        self.paused = False

    def release(self) -> None:
        if self.ref is not None and not self.alive():
            self.ref.close()


class ContainerLauncher(Keeper):
    """Starts named containers (the process backend's Launcher, for containers): `spawn` for a
    Python module, `run` for any program. It keeps every handle it gave out; `close` removes
    every container and volume carrying the run's label, whoever started it."""

    def __init__(self, client: Any, image: ImagePlan, run_dir: Path, run_id: str, owner: int,
                 extra: Callable[[str], dict] | None = None, before_remove: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.client, self.image, self.run_dir, self.run_id, self.owner = client, image, run_dir, run_id, owner
        self.extra = extra or (lambda name: {})     # per-name create options (volumes, GPUs)
        self.before_remove = before_remove          # last look at the run's volumes (keep their data)
        self.by_name: dict[str, ContainerHandle] = {}

    def labels(self, name: str) -> dict[str, str]:
        started = start_time(self.owner) if self.owner > 0 else None
        return {LABEL_RUN: self.run_id, LABEL_NODE: name, LABEL_KIND: kind_of(name), LABEL_OWNER: str(self.owner),
                LABEL_OWNER_START: repr(started)}

    def start(self) -> None:
        if self.closing:
            raise HarnessError("the run is being torn down; nothing more is started")

    def spawn(self, name: str, module: str, argv: list[str], log: Path) -> ContainerHandle:
        return self.run(name, python_module(module, *argv), log)

    def run(self, name: str, argv: list[str], log: Path, keep: bool = True) -> ContainerHandle:
        """Start `name`'s container: the existing one again when it has the same argv (a restart),
        else a new one. stdout and stderr go to `log` on the host, appended, as a process's do.
        `keep=False`: teardown's stop_all does not stop it; `close` removes it after `before_remove`
        (the volume holder: its tmpfs volumes vanish when it stops, so they are saved first, after
        the nodes wrote their last checkpoints)."""
        with self._lock:
            if self.closing:
                raise HarnessError(f"not starting {name}: the run is being torn down")
            old = self.by_name.get(name)
        command = self.image.command(argv)
        if old is not None and old.container.attrs["Config"]["Cmd"][4:] == command:
            old.start()
            with self._lock:
                return self._keep(old) if keep else old
        if old is not None:
            old.container.remove(force=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        opts = dict(self.extra(name))
        opts["volumes"] = {**self.image.mounts(self.run_dir), **opts.get("volumes", {})}
        # outside the lock: the engine creates containers in parallel (teardown removes by label,
        # so one created while it began is removed all the same)
        c = self.client.containers.run(
            self.image.tag, ["/bin/sh", "-c", 'exec "$@" >>"$PSCHAOS_LOG" 2>&1', "sh", *command],
            name=container_name(self.run_id, name), labels=self.labels(name), network_mode="host",
            pid_mode="host", environment={**self.image.environment(), "PSCHAOS_LOG": str(log)},
            working_dir=str(self.run_dir), detach=True, stdin_open=False, **opts)
        h = ContainerHandle(name, c, log)
        with self._lock:
            self.by_name[name] = h
            return self._keep(h) if keep else h

    def close(self) -> None:
        """Remove every container and volume of the run (by label; force: a paused or running one
        too), in parallel: teardown time does not grow with the cluster."""
        self.begin_close()
        try:
            if self.before_remove is not None:
                self.before_remove()
        finally:
            remove_run(self.client, self.run_id)


def run_containers(client: Any, run_id: str | None = None, attempts: int = 5) -> list[Any]:
    """Containers of `run_id` (or of any pschaos run), running or not. The SDK lists, then
    inspects each container: one another run removed in between is NotFound, so the listing is
    taken again (CI's test_docker_clean: `pschaos clean` crashed on a container a parallel test's
    teardown removed)."""
    import docker

    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    for _ in range(attempts - 1):
        try:
            return client.containers.list(all=True, filters={"label": label})
        except docker.errors.NotFound:
            time.sleep(0.1)
    return client.containers.list(all=True, filters={"label": label})


def run_volumes(client: Any, run_id: str | None = None) -> list[Any]:
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    return client.volumes.list(filters={"label": label})


def run_images(client: Any, run_id: str | None = None) -> list[Any]:
    """Images made for a run (labelled with it); the shared, content-addressed base is not one."""
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    return client.images.list(filters={"label": label})


REMOVE_ROUNDS = 3      # one retry of what failed, and one more listing for what appeared meanwhile


def remove_run(client: Any, run_id: str, containers: list[Any] | None = None) -> list[str]:
    """Remove a run's containers (force, in parallel), then its volumes and run images; returns
    what went. It lists again after each round until a listing is empty (a container created
    while teardown began shows up only then) and retries what failed; whatever is still there
    after REMOVE_ROUNDS is one HarnessError naming each thing and its last error: a run that
    leaves debris must say so, not pass quietly."""
    docker = sdk()
    gone: list[str] = []
    errors: dict[str, str] = {}

    def rm(what: str, remove: Callable[[], Any]) -> None:
        try:
            remove()
            gone.append(what)
            errors.pop(what, None)
        except docker.errors.NotFound:
            errors.pop(what, None)
        except Exception as e:  # noqa: BLE001 - collected, retried, then raised together
            errors[what] = f"{e.__class__.__name__}: {e}"

    for n in range(REMOVE_ROUNDS):
        cs = containers if n == 0 and containers is not None else run_containers(client, run_id)
        vs, ims = run_volumes(client, run_id), run_images(client, run_id)
        if n > 0 and not (cs or vs or ims):
            return gone
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(cs)))) as pool:
            list(pool.map(lambda c: rm(f"container {c.name}", lambda: c.remove(force=True)), cs))
        for v in run_volumes(client, run_id):          # listed after the containers that held them went
            rm(f"volume {v.name}", lambda v=v: v.remove(force=True))
        for im in run_images(client, run_id):
            rm(f"image {im.id[:19]}", lambda im=im: client.images.remove(im.id, force=True))
    left = ([f"container {c.name}" for c in run_containers(client, run_id)]
            + [f"volume {v.name}" for v in run_volumes(client, run_id)]
            + [f"image {im.id[:19]}" for im in run_images(client, run_id)])
    if left:
        raise HarnessError(f"run {run_id}: {len(left)} thing(s) still on the engine after {REMOVE_ROUNDS} rounds of "
                           "removal: " + "; ".join(f"{w} ({errors.get(w, 'listed again')})" for w in left)
                           + "; remove them with: pschaos clean --all")
    return gone
