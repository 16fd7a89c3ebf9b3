"""`pschaos sim calibrate|validate|scale|sweep`: the command-line side of the twin."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pschaos.harness.backends.sim.calibration import DEFAULT_PATH


def sim_main(args: argparse.Namespace) -> int:
    if args.sim_cmd == "calibrate":
        from pschaos.harness.proof.twin.calibrate import calibrate

        calibrate(Path(args.out) if args.out else DEFAULT_PATH, say=lambda m: print(m, file=sys.stderr, flush=True))
        return 0
    if args.sim_cmd in ("scale", "sweep"):
        from pschaos.harness.backends.sim.scale.commands import scale_main, sweep_main

        return (scale_main if args.sim_cmd == "scale" else sweep_main)(args)
    from pschaos.harness.proof.twin.validate import validate_main

    return validate_main(args)


__all__ = ["sim_main"]
