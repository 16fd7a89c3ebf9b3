"""A calibration file's figures are checked when it is loaded, each refusal naming the key
(review of the CPU model, M2: NaN, negative, zero cores and strings were taken as given)."""
from __future__ import annotations

import json

import pytest

from harness.errors import HarnessError
from harness.sim.calibration import DEFAULT_PATH, Calibration


@pytest.mark.parametrize("patch, words", [
    ({"cores": 0}, "cores=0 must be a finite number above 0"),
    ({"etcd_request_s": float("nan")}, "etcd_request_s=nan"),
    ({"replicate_request_s": -0.001}, "replicate_request_s=-0.001"),
    ({"client_request_s": "0.3"}, "client_request_s='0.3'"),
    ({"worker_step_s": {"mlp": float("inf")}}, "worker_step_s['mlp']=inf"),
    ({"worker_overhead_s": [1, 2]}, "worker_overhead_s must map a model name to seconds"),
])
def test_a_figure_the_twin_cannot_use_is_refused_by_name(tmp_path, patch, words):
    data = {**json.loads(DEFAULT_PATH.read_text()), **patch}
    p = tmp_path / "cal.json"
    p.write_text(json.dumps(data))
    with pytest.raises(HarnessError, match=words.replace("[", r"\[").replace("]", r"\]")):
        Calibration.load(p)


def test_the_committed_file_and_unmeasured_keys_load(tmp_path):
    assert Calibration.load(DEFAULT_PATH).cores
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({**json.loads(DEFAULT_PATH.read_text()), "replicate_request_s": None}))
    assert Calibration.load(p).replicate_request_s is None
