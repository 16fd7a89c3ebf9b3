"""What a scenario may ask of a system other than psnodes: an adapted store or a training job.

Checked when the scenario loads (scenario.py's fits_system), so a fault the system cannot take
is refused by name, with the fix, before anything starts.
"""
from __future__ import annotations

import re

# the fault kinds an adapted system takes (harness/backends/adapters/backend.py, portcut.py)
ADAPTED_KINDS = ("kill", "stop", "restart", "pause", "partition", "loss")
ADAPTED_CLUSTER_FIELDS = {"shards", "copies", "workers"}      # the rest of cluster is psnodes' own


def adapted_target_error(target: str, params: dict, copies: int) -> str | None:
    """What an adapted system cannot do with this fault, said with the fix; None if it can. Its
    fault targets are its data nodes `shard-0/<r>` (or selectors of them); its workers are
    threads of the harness, and it has no `etcd` or `toxiproxy` of pschaos'."""
    if "during" in params:
        return (f"params.during: {params['during']!r} times a kill to a psnodes protocol moment; an adapted "
                "system has none; remove during and give the fault a time or step")
    for n in re.findall(r"worker-\d+|\b(?:workers|etcd|toxiproxy)\b", target):
        return (f"target: {target!r}: {n} is not a node of an adapted system (its workers run inside the "
                f"harness); target its data nodes, shard-0/0 .. shard-0/{copies - 1}, or a selector such as "
                "primary(shard=0)")
    for m in re.finditer(r"shard-(\d+)/(\d+)", target):
        if int(m.group(1)) != 0 or int(m.group(2)) >= copies:
            return (f"target: {target!r}: {m.group(0)} is not a data node; an adapted system has shard-0/0 .. "
                    f"shard-0/{copies - 1}")
    return None


def job_problem(sc, job) -> str | None:
    """A training job: its checks, no psnodes settings, the fault kinds and roles it takes."""
    wrong = [c for c in sc.expect.checks if c not in job.checks]
    if wrong:
        return (f"expect.checks: {wrong} need psnodes' internals (or an adapted store's reads) and cannot judge the "
                f"training job {sc.system}; it is judged by {', '.join(job.checks)}")
    if sc.cluster.model_fields_set:
        return (f"cluster: {sorted(sc.cluster.model_fields_set)} are psnodes' settings and {sc.system} would ignore "
                "them; remove cluster (a training job takes its own settings under system_options)")
    if sc.workload.duration_s is not None or "read_every" in sc.workload.model_fields_set:
        return "workload: a training job takes steps and step_delay_s; remove duration_s and read_every"
    if sc.nemesis is not None:
        return "nemesis: a training job takes scheduled faults only (faults:); remove nemesis"
    for i, f in enumerate(sc.faults):
        roles = [r.strip() for r in re.split(r"<->|->", f.target) if r.strip()] if "->" in f.target else [f.target]
        for role in roles:
            err = job.fault_error(f.kind, role, sc.system_options)
            if err:
                return f"faults[{i}]: {err}"
        if f.params.get("wipe") or f.params.get("during") not in (None, "", "checkpoint"):
            return (f"faults[{i}].params: {sorted(k for k in ('during', 'wipe') if f.params.get(k))} time a kill to "
                    "psnodes' protocol moments or wipe its disk; a training job takes a plain kill, or "
                    "during: checkpoint (the kill lands while the role's shim says a checkpoint is being written)")
        writers = job.checkpoint_roles(sc.system_options)
        if f.params.get("during") == "checkpoint" and f.target not in writers:
            return (f"faults[{i}].target: {f.target!r} writes no checkpoint in {sc.system}; a kill during "
                    f"checkpoint targets a role that does: {', '.join(writers)}")
        if f.until is not None and f.until.step is None and f.until.time is None:
            return f"faults[{i}].until: give a time or a step"
    return job.scenario_error(1, sc.system_options)
