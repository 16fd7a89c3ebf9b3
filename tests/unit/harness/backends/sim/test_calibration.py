"""pschaos.harness.backends.sim.calibration: a step costs compute plus the per-step overhead, and the committed file
says where each figure comes from."""
import json
from pathlib import Path

import pytest

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.sim.calibration import DEFAULT_PATH, OVERHEAD_S, Calibration


def test_a_step_costs_compute_plus_overhead_per_model() -> None:
    cal = Calibration(worker_step_s={"mlp": 0.001, "widedeep": 0.002},
                      worker_overhead_s={"mlp": 0.005, "widedeep": 0.01})
    assert cal.step_s("mlp") == pytest.approx(0.006) and cal.step_s("widedeep") == pytest.approx(0.012)
    assert cal.step_s("other") == pytest.approx(0.012)          # unknown model: the largest of each


def test_a_file_without_overhead_gets_the_default_and_unknown_keys_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({"worker_step_s": {"mlp": 0.001}}))
    assert Calibration.load(p).worker_overhead_s == OVERHEAD_S
    p.write_text(json.dumps({"worker_overhead": {"mlp": 0.001}}))
    with pytest.raises(HarnessError, match="unknown key"):
        Calibration.load(p)


def test_the_committed_file_loads_round_trips_and_carries_the_cpu_model() -> None:
    cal = Calibration.load(DEFAULT_PATH)
    assert Calibration(**cal.to_json()).to_json() == cal.to_json()
    assert set(cal.worker_step_s) == {"mlp", "widedeep"}
    assert set(cal.worker_overhead_s) == {"mlp", "widedeep", "mlp/async", "widedeep/async", "mlp/sync/ssp"}
    # a step's time now comes from the CPU model (harness/backends/sim/cpu.py): the host's cores and the CPU
    # of every call, measured; the overhead is only the leftover, never negative
    assert cal.cores is not None and cal.cores >= 1
    assert cal.server_request_s > 0 and cal.client_request_s > 0 and cal.etcd_request_s > 0 and cal.etcd_client_s > 0
    assert cal.replicate_request_s > 0 and cal.replicate_s_per_mb > 0 and cal.replicate_send_s > 0
    assert all(v >= 0 for v in cal.worker_overhead_s.values())
    assert cal.step_s("mlp") >= cal.worker_step_s["mlp"] and cal.step_s("widedeep") >= cal.worker_step_s["widedeep"]


def test_the_committed_calibration_has_every_timing_the_twin_uses():
    """A key missing from the default file silently defaults to 0 (no start time, no etcd time,
    no step spread): the committed file must carry them all, measured."""
    import json

    from pschaos.harness.backends.sim.calibration import DEFAULT_PATH, KEYS, Calibration

    data = json.loads(DEFAULT_PATH.read_text())
    assert set(data) == set(KEYS), set(KEYS) - set(data)
    cal = Calibration.default()
    assert cal.node_start_s > 0 and cal.etcd_read_s > 0 and cal.etcd_write_s > 0
    assert cal.network.get("probe_refused_s", 0) > 0 and cal.network.get("probe_refused_samples")
    for model in ("mlp", "widedeep"):
        assert cal.jitter(model) > 0 and f"{model}/async" in cal.worker_overhead_s



def test_an_eval_pass_costs_its_calibrated_figure_keyed_as_the_overhead_is():
    cal = Calibration(worker_eval_s={"mlp": 0.001, "widedeep": 0.006, "widedeep/async": 0.005})
    assert cal.eval_s("widedeep") == 0.006 and cal.eval_s("widedeep", "async") == 0.005
    assert cal.eval_s("mlp", "async") == 0.001 and cal.eval_s("other") == 0.006
    committed = Calibration.default()
    assert set(committed.worker_eval_s) == {"mlp", "widedeep", "mlp/async", "widedeep/async", "mlp/sync/ssp"}
    # what an eval pass costs beyond the CPU model (its row pulls' CPU on the shared cores): a
    # leftover, never negative, under a training step (widedeep's is 0: the modelled pulls already
    # take longer than a real pass)
    assert 0 <= committed.eval_s("widedeep") < committed.step_s("widedeep")


def test_the_most_specific_key_measured_is_used():
    from pschaos.harness.backends.sim.calibration import Calibration

    cal = Calibration(worker_step_s={"mlp": 0.001}, worker_overhead_s={"mlp": 0.007, "mlp/async": 0.006,
                                                                       "mlp/sync/ssp": 0.009})
    assert abs(cal.step_s("mlp", "sync", "ssp") - 0.010) < 1e-12       # SSP's own
    assert abs(cal.step_s("mlp", "sync", "bsp") - 0.008) < 1e-12       # none for BSP: the model's
    assert abs(cal.step_s("mlp", "async", "ssp") - 0.007) < 1e-12      # no async/ssp key: async replication's


def test_a_replicate_costs_its_own_figures_or_a_pushs_in_an_older_file():
    old = Calibration(server_request_s=0.0008, apply_s_per_mb=0.001, client_request_s=0.0007, cores=2)
    assert old.replicate_cpu() == (0.0008, 0.001, 0.0007)
    before_cpu_model = Calibration(server_request_s=0.0008, apply_s_per_mb=0.001, client_request_s=0.0007)
    assert before_cpu_model.replicate_cpu() == (0.0, 0.0, 0.0)
    new = Calibration(server_request_s=0.0008, apply_s_per_mb=0.001, client_request_s=0.0007, cores=2,
                      replicate_request_s=0.0004, replicate_s_per_mb=0.002, replicate_send_s=0.0002)
    assert new.replicate_cpu() == (0.0004, 0.002, 0.0002)


def test_a_workers_call_extra_and_a_copys_idle_cpu_are_keyed_and_none_in_older_files(tmp_path: Path) -> None:
    cal = Calibration(cores=2, client_cpu_extra_s={"mlp": 0.0003, "mlp/async": 0.0002}, copy_idle_cpu_s=0.014)
    assert cal.client_cpu_extra("mlp") == 0.0003 and cal.client_cpu_extra("mlp", "async") == 0.0002
    assert cal.idle_cpu() == 0.014
    assert Calibration(cores=2).client_cpu_extra("mlp") == 0.0 and Calibration(cores=2).idle_cpu() == 0.0
    before_cpu_model = Calibration(client_cpu_extra_s={"mlp": 0.0003}, copy_idle_cpu_s=0.014)
    assert before_cpu_model.client_cpu_extra("mlp") == 0.0 and before_cpu_model.idle_cpu() == 0.0
    f = tmp_path / "c.json"
    f.write_text(json.dumps({**cal.to_json(), "copy_idle_cpu_s": -0.01}))
    with pytest.raises(HarnessError, match="copy_idle_cpu_s=-0.01 must be a finite number at or above 0"):
        Calibration.load(f)
    f.write_text(json.dumps({**cal.to_json(), "client_cpu_extra_s": {"mlp": "fast"}}))
    with pytest.raises(HarnessError, match=r"client_cpu_extra_s\['mlp'\]='fast'"):
        Calibration.load(f)
    f.write_text(json.dumps(cal.to_json()))
    assert Calibration.load(f).client_cpu_extra_s == cal.client_cpu_extra_s
