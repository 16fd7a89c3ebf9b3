"""pschaos sim validate judges on evidence: a targeted metric missing on either side fails."""
from harness.sim.validate import compare, pooled


def test_a_missing_targeted_metric_fails_and_informational_ones_do_not_count():
    c = compare({"failover_p50_ms": 500.0, "acked_per_s": 100.0}, {"failover_p50_ms": None, "acked_per_s": 105.0},
                ("failover_p50_ms", "acked_per_s"))
    assert c["failover_p50_ms"]["holds"] is False
    assert c["acked_per_s"]["holds"] is True and abs(c["acked_per_s"]["rel_error"] - 0.05) < 1e-9
    assert c["catchup_s"]["holds"] is None and c["catchup_s"]["target"] is None


def test_pooled_failovers_take_percentiles_over_every_seed_and_drop_nothing_finite():
    runs = [{"failover_ms": [400.0, 600.0], "acked_per_s": 10.0, "catchup_bytes": None, "catchup_s": None,
             "lag": None, "final_loss": 0.1},
            {"failover_ms": [500.0], "acked_per_s": 20.0, "catchup_bytes": 5, "catchup_s": 0.0, "lag": 1.0,
             "final_loss": 0.3}]
    p = pooled(runs)
    assert p["failovers"] == 3 and p["failover_p50_ms"] == 500.0 and p["failover_p99_ms"] == 600.0
    assert p["acked_per_s"] == 15.0 and p["final_loss_band"] == [0.1, 0.3]


def test_background_is_auto_or_a_number_of_jobs_and_a_real_runs_load_is_read_from_its_report(tmp_path):
    import json

    import pytest

    from harness.sim.validate import background_of, measured_background

    assert background_of("auto") is None and background_of("0") == 0.0 and background_of("1.5") == 1.5
    for bad in ("-1", "lots", "inf", "nan"):
        with pytest.raises(ValueError, match="--background"):
            background_of(bad)
    (tmp_path / "report.json").write_text(json.dumps({"host_load": {"background_cores": 0.7}}))
    assert measured_background(tmp_path) == 0.7
    (tmp_path / "report.json").write_text(json.dumps({}))          # a report from before host_load: an idle host
    assert measured_background(tmp_path) == 0.0


def test_a_real_run_that_did_not_pass_leaves_the_targets_unjudged(tmp_path, monkeypatch, capsys):
    """A failed or unknown run is no evidence of its timings (review of the CPU model, L7: validate
    compared against a failed real run and could write all_targets_hold: true while exiting 3)."""
    import argparse
    import json

    import harness.sim.validate as v

    def obs(verdict: str) -> dict:
        return {"verdict": verdict, "failover_ms": [170.0], "migration_unavailable_p50_ms": None,
                "migration_bytes_ratio": None, "keys_moved_fraction": None, "acked_per_s": 400.0,
                "catchup_bytes": 1000, "catchup_s": 0.1, "lag": 0.1, "ssp_lead": None, "final_loss": 0.01,
                "wall_s": 1.0, "handoff": {}}
    monkeypatch.setattr(v, "_run", lambda path, backend, seed, out, cal, bg=0.0: tmp_path / f"{backend}-{seed}")
    monkeypatch.setattr(v, "observe", lambda d: obs("fail" if d.name == "process-1" else "pass"))
    monkeypatch.setattr(v, "measured_background", lambda d: 0.0)
    args = argparse.Namespace(out=str(tmp_path / "out"), seeds=2, scenario=["kill-primary"], json=False,
                              calibration=None, calibrate=False, background="auto")
    assert v.validate_main(args) == 3
    doc = json.loads((tmp_path / "out" / "validate.json").read_text())
    assert doc["all_targets_hold"] is None
    assert doc["unknown_reasons"] == ["kill-primary seed 1 on process: fail"]
    assert "not judged: kill-primary seed 1 on process: fail" in capsys.readouterr().out
