"""A job's temporary files land in its run's data folder, not the machine's /tmp: torchrun's agent
makes a `torchelastic_*` folder there each launch and never removes it (this machine's /tmp held
some 280 of them from the library's DDP scenarios on 2026-12-06)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.unit.harness.backends.jobs.test_job_links import ddp_backend


def test_a_launched_process_makes_its_temporary_folders_in_the_run_data(tmp_path):
    be = ddp_backend(tmp_path)
    env = {**os.environ, **be._env("agent")}
    out = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp(prefix='torchelastic_'))"],
                         env=env, capture_output=True, text=True, check=True)
    made = Path(out.stdout.strip())
    assert made.is_dir() and made.is_relative_to(tmp_path / "data"), made
    be.discard_data()
    assert not made.exists()              # gone with the run's data
