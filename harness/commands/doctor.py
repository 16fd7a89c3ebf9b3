"""`pschaos doctor`: which real parts are present, their versions, and how to install what is not."""
from __future__ import annotations

import json
import sys

from pschaos.harness.backends.docker.engine import network_status, server_version
from pschaos.harness.machinery.parts import (etcd_problem, power_loss_disk, python_rows,  # noqa: F401 - etcd_problem: its users
                                             tool_rows)


def collect() -> list[dict]:
    rows = tool_rows()
    engine, why = server_version()      # the engine itself (its API), not only the client binary
    rows.append({"part": "docker-engine", "version": engine, "ok": engine is not None, "required": False,
                 "install": why})
    if engine is not None:              # the network rule: loopback only, no bridge (harness/backends/docker/engine.py)
        broken = network_status()
        rows.append({"part": "docker-network", "version": None if broken else "host network only, no bridge",
                     "ok": broken is None, "required": False, "install": broken})
    rows += python_rows()
    rows.append(power_loss_disk())
    try:
        import torch

        cuda = torch.cuda.is_available()
        rows.append({"part": "cuda", "version": torch.version.cuda if cuda else None, "ok": cuda, "required": False,
                     "install": None if cuda else "no GPU visible: workers train on the CPU (device=auto)"})
    except ImportError:
        pass
    return rows


def doctor(as_json: bool = False) -> int:
    rows = collect()
    if as_json:
        print(json.dumps({"python": sys.version.split()[0], "parts": rows}, indent=2))
    else:
        print(f"python {sys.version.split()[0]}")
        for r in rows:
            mark = "ok " if r["ok"] else ("MISSING" if r["required"] else "absent")
            print(f"  {mark:8} {r['part']:18} {r['version'] or ''}")
            if r["install"]:
                print(f"           -> {r['install']}")
    return 0 if all(r["ok"] for r in rows if r["required"]) else 2


def doctor_on_ray(address: str | None, as_json: bool = False) -> int:
    """`pschaos doctor --on ray[=ADDRESS]`: every node, what it has, what it lacks for each
    backend. Exit 0 when every node with a CPU can run both backends, 1 when one lacks something
    for one (it places no such run), 2 when no node can run even the sim backend or Ray is not
    there. A node of no CPU runs nothing, so what it lacks does not count; what a scenario needs
    beyond its backend (the power-loss disk, a system's parts) is said, and does not count either."""
    from pschaos.harness.errors import HarnessError
    from pschaos.harness.fanout.nodes import DISK_PART, SYSTEM_PARTS, lacks, placeable, survey
    from pschaos.harness.fanout.ray_runs import connect, disconnect
    from pschaos.harness.fanout.task import version

    try:
        ray, local = connect(address, 1)
    except HarnessError as e:
        print(f"pschaos doctor --on ray: {e}")
        return 2
    try:
        reports = survey(ray)
    finally:
        disconnect(ray, local, address)
    mine = version()
    if as_json:
        print(json.dumps({"driver_version": mine, "nodes": reports}, indent=2))
    else:
        print(f"Ray at {address or 'a local cluster on 127.0.0.1'}: {len(reports)} node(s); the driver runs pschaos {mine}")
        for r in reports:
            print(f"  node {r['node'][:12]} on {r['host']}, {r['cpus']} CPU(s), pschaos {r.get('version')}"
                  + ("" if r["cpus"] > 0 else ": no CPU, runs nothing (a head started with --num-cpus=0)"))
            for backend in ("sim", "process"):
                got = lacks(r, backend, mine)
                print(f"    {backend:8} " + ("ready" if not got else "lacks " + ", ".join(got)))
            for what, needs in (("power-loss and torn-write", (DISK_PART,)), *SYSTEM_PARTS.items()):
                extra = lacks(r, "process", mine, needs)
                if r["cpus"] > 0 and not lacks(r, "process", mine) and extra:
                    print(f"    {'':8} {what} process runs also need {', '.join(extra)}: none is placed here")
    if not placeable(reports, "sim", mine):
        return 2
    runners = [r for r in reports if r["cpus"] > 0]      # a node with no CPU places nothing: what it lacks is moot
    return 0 if all(not lacks(r, b, mine) for r in runners for b in ("sim", "process")) else 1
