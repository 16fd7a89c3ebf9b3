"""One run of a validate comparison, real or twin: the runner with the twin's calibration, load
and host speed (validate.py runs them here; twin_on_ray.py runs twins on Ray nodes)."""
from __future__ import annotations

from pathlib import Path

from pschaos.harness.run.scenario import load_scenario


def run_one(path: Path, backend: str, seed: int, out: Path, cal: str | None, background: float = 0.0,
            slowdown: float = 1.0) -> Path:
    """The scenario at `path` once, into out/NAME/BACKEND-SEED; on sim with that calibration, load
    and host speed."""
    from pschaos.harness.backends.adapters.psnodes import BACKENDS
    from pschaos.harness.run.runner import Runner

    sc = load_scenario(path)
    make = BACKENDS[backend]
    if backend == "sim":
        from pschaos.harness.backends.sim.backend import sim_factory

        make = sim_factory(cal, background, slowdown)     # the sim with the given calibration, load and speed
    d = out / sc.name / f"{backend}-{seed}"
    Runner(sc, seed, d, backend, quiet=True, make_backend=make).run()
    return d
