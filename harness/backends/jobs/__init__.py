"""Training jobs we did not write, under the same chaos (api.py: what a user writes).

A scenario names one in `system:` by name (JOBS) or by import path (`module:Class`).
"""
from __future__ import annotations

JOBS: dict[str, str] = {"torchrun-ddp": "pschaos.harness.backends.jobs.torchrun_ddp:TorchrunDDP",
                        "tf-ps": "pschaos.harness.backends.jobs.tf_ps:TFParameterServer",
                        "accelerate-ddp": "pschaos.harness.backends.jobs.accelerate_ddp:AccelerateDDP"}
