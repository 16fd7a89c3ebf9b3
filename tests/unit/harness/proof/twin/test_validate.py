"""pschaos sim validate judges on evidence: a targeted metric missing on either side fails."""
from pschaos.harness.proof.twin.validate import compare, pooled


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

    from pschaos.harness.proof.twin.measured import measured_background
    from pschaos.harness.proof.twin.validate import background_of

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

    import pschaos.harness.proof.twin.validate as v

    def obs(verdict: str) -> dict:
        return {"verdict": verdict, "failover_ms": [170.0], "migration_unavailable_p50_ms": None,
                "migration_bytes_ratio": None, "keys_moved_fraction": None, "acked_per_s": 400.0,
                "catchup_bytes": 1000, "catchup_s": 0.1, "lag": 0.1, "ssp_lead": None, "final_loss": 0.01,
                "wall_s": 1.0, "handoff": {}}
    monkeypatch.setattr(v, "_run", lambda path, backend, seed, out, cal, bg=0.0, slow=1.0: tmp_path / f"{backend}-{seed}")
    monkeypatch.setattr(v, "observe", lambda d: obs("fail" if d.name == "process-1" else "pass"))
    monkeypatch.setattr(v, "measured_background", lambda d: 0.0)
    monkeypatch.setattr(v, "measured_probe", lambda d: 1.0)
    args = argparse.Namespace(out=str(tmp_path / "out"), seeds=2, scenario=["kill-primary"], json=False,
                              calibration=None, calibrate=False, background="auto")
    assert v.validate_main(args) == 3
    doc = json.loads((tmp_path / "out" / "validate.json").read_text())
    assert doc["all_targets_hold"] is None
    assert doc["unknown_reasons"] == ["kill-primary seed 1 on process: fail"]
    assert "not judged: kill-primary seed 1 on process: fail" in capsys.readouterr().out


def test_host_slowdown_is_auto_or_a_factor_and_a_real_runs_probe_is_read_from_its_report(tmp_path):
    import json

    import pytest

    from pschaos.harness.proof.twin.measured import measured_probe
    from pschaos.harness.proof.twin.validate import slowdown_of

    assert slowdown_of("auto") is None and slowdown_of("1") == 1.0 and slowdown_of("1.25") == 1.25
    for bad in ("0", "-1", "fast", "inf", "nan"):
        with pytest.raises(ValueError, match="--host-slowdown"):
            slowdown_of(bad)
    (tmp_path / "report.json").write_text(json.dumps({"host_load": {"probe_ms": 1.8, "probe_samples": 30}}))
    assert measured_probe(tmp_path) == 1.8
    for absent in ({}, {"host_load": {"probe_ms": None, "probe_samples": 0}}):   # before the probe; too short
        (tmp_path / "report.json").write_text(json.dumps(absent))
        assert measured_probe(tmp_path) is None


def test_each_sim_run_is_slowed_by_its_real_runs_probe_over_the_calibrations(tmp_path, monkeypatch, capsys):
    """--host-slowdown auto: the twin of seed N gets the probe its real run read (report.json
    host_load.probe_ms) over the calibration's host_probe_ms; a number is given to every run; a
    calibration without the baseline corrects nothing and says so."""
    import argparse
    import json

    import pschaos.harness.proof.twin.validate as v
    from pschaos.harness.backends.sim.calibration import DEFAULT_PATH

    from pschaos.harness.machinery.hostspeed import identity

    base = json.loads(DEFAULT_PATH.read_text())
    cal = {**base, "host_probe_ms": {"mlp": 2.0, "widedeep": 9.0}, "measured": {**base["measured"], "probe": identity()}}
    (tmp_path / "cal.json").write_text(json.dumps(cal))
    old = {k: x for k, x in cal.items() if k != "host_probe_ms"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    other = {**cal, "measured": {**cal["measured"], "probe": {**identity(), "unit_loops": 1}}}
    (tmp_path / "other.json").write_text(json.dumps(other))
    probes: dict[int, float | None] = {1: 3.0, 2: 1.5}
    calls: list[tuple[str, int, float]] = []

    def run(path, backend, seed, out, cal, bg=0.0, slow=1.0):
        calls.append((backend, seed, slow))
        d = tmp_path / "runs" / f"{backend}-{seed}"
        d.mkdir(parents=True, exist_ok=True)
        load = {"background_cores": 0.0, "probe_ms": probes[seed]}
        if probes[seed] is None:
            load["probe_unknown"] = "no sample in the training window"
        (d / "report.json").write_text(json.dumps({"host_load": load}))
        return d
    obs = {"verdict": "pass", "failover_ms": [170.0], "migration_unavailable_p50_ms": None,
           "migration_bytes_ratio": None, "keys_moved_fraction": None, "acked_per_s": 400.0,
           "catchup_bytes": 1000, "catchup_s": 0.1, "lag": 0.1, "ssp_lead": None, "final_loss": 0.01,
           "wall_s": 1.0, "handoff": {}}
    monkeypatch.setattr(v, "_run", run)
    monkeypatch.setattr(v, "observe", lambda d: dict(obs))

    def main(calibration: str, slowdown: str) -> dict:
        calls.clear()
        args = argparse.Namespace(out=str(tmp_path / "out"), seeds=2, scenario=["kill-primary"], json=False,
                                  calibration=calibration, calibrate=False, background="auto",
                                  host_slowdown=slowdown)
        assert v.validate_main(args) == 0
        return json.loads((tmp_path / "out" / "validate.json").read_text())
    doc = main(str(tmp_path / "cal.json"), "auto")       # kill-primary trains mlp: its baseline is 2.0
    # every real run first (a twin needs its seed's figures; the twins may then go out at once: --on ray)
    assert calls == [("process", 1, 1.0), ("process", 2, 1.0), ("sim", 1, 1.5), ("sim", 2, 0.75)]
    assert doc["scenarios"]["kill-primary"]["host_slowdown"] == [1.5, 0.75]
    assert doc["calibration_probe_ms"] == {"mlp": 2.0, "widedeep": 9.0} and "notes" not in doc
    main(str(tmp_path / "cal.json"), "1.1")
    assert [c[2] for c in calls if c[0] == "sim"] == [1.1, 1.1]
    capsys.readouterr()
    probes[2] = None                                      # a real run whose window held no sample
    doc = main(str(tmp_path / "cal.json"), "auto")
    assert [c[2] for c in calls if c[0] == "sim"] == [1.5, 1.0]
    assert doc["scenarios"]["kill-primary"]["host_slowdown"] == [1.5, None]
    assert doc["notes"] == ["kill-primary seed 2: its real run read no host speed (no sample in the training "
                            "window); its twin ran at the calibration's speed"]
    assert "seed 2: its real run read no host speed" in capsys.readouterr().err
    probes[2] = 1.5
    partial = {**cal, "host_probe_ms": {"widedeep": 9.0}}          # kill-primary's kind (mlp) read none
    (tmp_path / "partial.json").write_text(json.dumps(partial))
    for f, why in (("old.json", "no host_probe_ms"), ("other.json", "not comparable"),
                   ("partial.json", "no host probe for its kind of run")):
        doc = main(str(tmp_path / f), "auto")
        assert [c[2] for c in calls if c[0] == "sim"] == [1.0, 1.0]        # never widedeep's 9.0
        assert doc["scenarios"]["kill-primary"]["host_slowdown"] == [None, None]
        assert any(why in n for n in doc["notes"]), doc["notes"]
        assert why in capsys.readouterr().err
        assert ("calibration_probe_ms" in doc) == (f == "partial.json")   # baselines only where they were read


def _scenario(**errs: tuple[float, float]) -> dict:
    """A scenario's compare block: metric -> (measured, predicted), each targeted at 10%."""
    return {"compare": {k: {"measured": m, "predicted": p, "target": 0.1,
                            "holds": abs(p - m) / m <= 0.1} for k, (m, p) in errs.items()}}


def test_a_scenario_with_a_run_that_did_not_pass_is_not_judged_and_the_others_are():
    """validate of 2026-12-07: five twin runs of async-kill-primary were unknown, and no target of
    any scenario was judged; now only that scenario's are left out, and the count says so."""
    from pschaos.harness.proof.twin.validate import judge

    result = {"scenarios": {"kill-primary": _scenario(failover_p50_ms=(175.0, 163.0), acked_per_s=(445.0, 484.0)),
                            "async-kill-primary": _scenario(failover_p50_ms=(174.0, 163.0)),
                            "scale-in-shards": _scenario(acked_per_s=(504.0, 486.0))}}
    judge(result, ["async-kill-primary seed 1 on sim: unknown"])
    assert result["targets"] == {"held": 3, "judged": 3, "total": 4}
    assert result["all_targets_hold"] is None                   # one target was not judged: no verdict
    assert result["scenarios"]["async-kill-primary"]["not_judged"] == ["async-kill-primary seed 1 on sim: unknown"]
    assert result["scenarios"]["async-kill-primary"]["compare"]["failover_p50_ms"]["holds"] is None
    assert result["unknown_reasons"] == ["async-kill-primary seed 1 on sim: unknown"]
    assert "failover_p50_ms" not in result["one_sided"]         # judged on one scenario only
    assert result["one_sided"] == {}                            # acked_per_s: high on one, low on the other


def test_a_metric_that_errs_the_same_way_on_every_scenario_is_named_even_within_its_target():
    from pschaos.harness.proof.twin.validate import judge

    result = {"scenarios": {"kill-primary": _scenario(failover_p50_ms=(175.0, 163.0), acked_per_s=(100.0, 95.0)),
                            "ssp-kill-primary": _scenario(failover_p50_ms=(178.6, 165.5), acked_per_s=(100.0, 130.0))}}
    judge(result, [])
    assert result["targets"] == {"held": 3, "judged": 4, "total": 4}
    assert result["all_targets_hold"] is False
    assert result["one_sided"] == {"failover_p50_ms": ("low", ["kill-primary", "ssp-kill-primary"])}
