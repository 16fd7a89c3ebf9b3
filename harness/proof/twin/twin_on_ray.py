"""`pschaos sim validate --on ray`: the twin runs as Ray tasks; the real runs stay here.

A twin run needs its real run's figures first (the background load and the host's speed it
measured, validate.py), so validate runs every seed's real run here, then sends the twins out
at once. Each task runs the twin in its worker (the simulator needs no other process) with the
scenario and the calibration sent as text, and brings back the two files validate reads
(report.json and history.jsonl), written where a twin run here would have written them.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

RUN_FILES = ("report.json", "history.jsonl", "summary.md")


def twin_on_node(name: str, text: str, seed: int, cal_text: str | None, background: float, slow: float) -> dict:
    """On a node: one twin run of the scenario `text`, with that load and host speed."""
    from pschaos.harness.fanout.task import version
    from pschaos.harness.proof.twin.runs import run_one

    with tempfile.TemporaryDirectory(prefix="pschaos-twin-") as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(text)
        cal = None
        if cal_text is not None:
            cal = str(Path(tmp) / "calibration.json")
            Path(cal).write_text(cal_text)
        d = run_one(path, "sim", seed, Path(tmp) / "out", cal, background, slow)
        return {"version": version(), "files": {f: (d / f).read_text() for f in RUN_FILES if (d / f).is_file()}}


def twins_on_ray(pool: Any, path: Path, twins: list[tuple[int, float, float]], out: Path, cal: str | None) -> list[Path]:
    """Each (seed, background, slowdown) as a task on `pool`; the run folders, in that order. A
    result from other code than the driver's is refused (HarnessError): its figures would not be
    this twin's."""
    from pschaos.harness.errors import HarnessError
    from pschaos.harness.run.scenario import load_scenario

    name = load_scenario(path).name
    cal_text = Path(cal).read_text() if cal else None
    results = pool.map(twin_on_node, [(path.stem, path.read_text(), seed, cal_text, bg, slow) for seed, bg, slow in twins])
    dirs = []
    for (seed, _, _), res in zip(twins, results):
        if res.get("version") != pool.mine:
            raise HarnessError(f"--on ray: a twin run of {name} seed {seed} came back from pschaos {res.get('version')}, "
                               f"not {pool.mine} as here: install the same pschaos on every node")
        d = out / name / f"sim-{seed}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for f, body in res["files"].items():
            (d / f).write_text(body)
        dirs.append(d)
    return dirs
