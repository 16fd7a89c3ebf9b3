"""A calibration file's figures are checked when it is loaded, each refusal naming the key
(review of the CPU model, M2: NaN, negative, zero cores and strings were taken as given)."""
from __future__ import annotations

import json

import pytest

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.sim.calibration import DEFAULT_PATH, Calibration


@pytest.mark.parametrize("patch, words", [
    ({"cores": 0}, "cores=0 must be a finite number above 0"),
    ({"etcd_request_s": float("nan")}, "etcd_request_s=nan"),
    ({"replicate_request_s": -0.001}, "replicate_request_s=-0.001"),
    ({"client_request_s": "0.3"}, "client_request_s='0.3'"),
    ({"worker_step_s": {"mlp": float("inf")}}, "worker_step_s['mlp']=inf"),
    ({"worker_overhead_s": [1, 2]}, "worker_overhead_s must map a model name to seconds"),
    ({"push_cpu_extra_s": {"mlp": -0.001}}, "push_cpu_extra_s['mlp']=-0.001"),
    ({"replicate_cpu_extra_s": 0.001}, "replicate_cpu_extra_s must map a model name to seconds"),
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


def test_a_file_from_before_the_cpu_model_charges_no_call_cpu(tmp_path):
    """Its worker overhead holds the server's share of a step's calls already (M3 of the review:
    the new code charged server_request_s on every push and pull on top, and a push's figures for
    every Replicate)."""
    old = {"server_request_s": 0.000337, "worker_overhead_s": {"mlp": 0.0098}, "apply_s_per_mb": 0.004}
    p = tmp_path / "old.json"
    p.write_text(json.dumps(old))
    cal = Calibration.load(p)
    assert not cal.cpu_model
    assert cal.request_cpu() == 0.0 and cal.replicate_cpu() == (0.0, 0.0, 0.0)
    assert cal.copy_cpu_extra("mlp") == (0.0, 0.0)
    now = Calibration.load(DEFAULT_PATH)
    assert now.cpu_model and now.request_cpu() > 0 and min(now.replicate_cpu()) > 0


def test_an_unreadable_calibration_file_is_named(tmp_path):
    with pytest.raises(HarnessError, match="could not be read"):
        Calibration.load(tmp_path)                  # a folder: IsADirectoryError


def test_an_infinite_background_is_refused():
    import simpy

    from pschaos.harness.backends.sim.cpu import SimCPU
    with pytest.raises(HarnessError, match="background=inf"):
        SimCPU(simpy.Environment(), 2, float("inf"))


def test_a_copys_cpu_beyond_the_calls_is_keyed_as_the_overhead_and_none_where_unmeasured(tmp_path):
    """push_cpu_extra_s / replicate_cpu_extra_s: a file without them (measured before them) charges
    none, so it predicts exactly as it did; one with them picks the mode's figure."""
    base = {k: v for k, v in json.loads(DEFAULT_PATH.read_text()).items()
            if k not in ("push_cpu_extra_s", "replicate_cpu_extra_s")}
    p = tmp_path / "before.json"
    p.write_text(json.dumps(base))
    assert Calibration.load(p).copy_cpu_extra("mlp", "sync", "async") == (0.0, 0.0)
    p.write_text(json.dumps({**base, "push_cpu_extra_s": {"mlp": 0.001, "mlp/async": 0.0005},
                             "replicate_cpu_extra_s": {"mlp": 0.0007}}))
    cal = Calibration.load(p)
    assert cal.copy_cpu_extra("mlp") == (0.001, 0.0007)
    assert cal.copy_cpu_extra("mlp", "async") == (0.0005, 0.0007)


def test_the_host_probe_baseline_is_optional_positive_and_kept(tmp_path):
    """host_probe_ms (harness/machinery/hostspeed.py), keyed like the overhead: absent in a file measured
    before it (no correction), refused when not a map of positive figures, written back as read."""
    base = {k: v for k, v in json.loads(DEFAULT_PATH.read_text()).items() if k != "host_probe_ms"}
    p = tmp_path / "c.json"
    p.write_text(json.dumps(base))
    assert Calibration.load(p).host_probe_ms == {} and Calibration.load(p).probe_ms("mlp") is None
    probes = {"mlp": 1.75, "widedeep": 2.5, "mlp/sync/ssp": 1.5}
    p.write_text(json.dumps({**base, "host_probe_ms": probes}))
    cal = Calibration.load(p)
    assert cal.to_json()["host_probe_ms"] == probes
    assert cal.probe_ms("mlp") == 1.75 and cal.probe_ms("mlp", "sync", "ssp") == 1.5 and cal.probe_ms("widedeep") == 2.5
    # the key the overhead is read from, and only it: never another kind's baseline
    overheads = {"mlp": 0.003, "mlp/async": 0.002, "widedeep": 0.005}
    p.write_text(json.dumps({**base, "worker_overhead_s": overheads, "host_probe_ms": probes}))
    cal = Calibration.load(p)
    assert cal.probe_ms("mlp", "async") is None             # its overhead is mlp/async's, which read no probe
    assert cal.probe_ms("mlp", "sync", "ssp") == 1.75       # no mlp/sync/ssp overhead: mlp's, with mlp's baseline
    assert cal.probe_ms("resnet") is None                   # an unmeasured model's overhead is the largest: no baseline
    for bad in (0, -1.0, "fast", 1.75):
        p.write_text(json.dumps({**base, "host_probe_ms": bad if bad == 1.75 else {"mlp": bad}}))
        with pytest.raises(HarnessError, match="host_probe_ms"):
            Calibration.load(p)
