"""The failure detector's settings: ClusterConfig fields (each bad value refused with the field
and the fix), the floor the follower lease uses, and a scenario's `cluster.detector` block."""
import pytest

from pschaos.harness.backends.detector import DetectorSpec
from pschaos.harness.errors import ScenarioError
from pschaos.harness.run.scenario import load_scenario
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core.detector import FixedDetector, PhiDetector
from pschaos.psnodes.errors import ConfigError


def cfg(**kw) -> ClusterConfig:
    return ClusterConfig(cluster_id="t", etcd="http://127.0.0.1:1", **kw)


def test_defaults_are_phi_with_a_floor_the_lease_uses():
    c = cfg()
    assert c.detector == "phi" and c.suspect_floor_s == c.phi_floor_s == 0.15
    d = c.failure_detector()
    assert isinstance(d, PhiDetector) and d.floor_s == 0.15 and d.p.first_s == c.heartbeat_s
    assert c.failure_detector() is not d                      # one per copy, never shared


def test_fixed_mode_is_the_old_rule_and_its_floor_is_suspect_s():
    c = cfg(detector="fixed", suspect_s=0.4)
    assert c.suspect_floor_s == 0.4
    assert isinstance(c.failure_detector(), FixedDetector) and c.failure_detector().silence_s() == 0.4


@pytest.mark.parametrize("kw, words", [
    (dict(detector="adaptive"), "detector='adaptive' is unknown; use 'phi'"),
    (dict(phi_floor_s=0.05), "phi_floor_s=0.05 must be longer than heartbeat_s=0.05"),
    (dict(phi_threshold=0), "phi_threshold=0 must be in (0, 30]"),
    (dict(phi_threshold=31), "phi_threshold=31 must be in (0, 30]"),
    (dict(phi_pause_s=-0.1), "phi_pause_s=-0.1 must be >= 0"),
    (dict(phi_min_std_s=0), "phi_min_std_s=0 must be > 0"),
    (dict(phi_window=1), "phi_window=1 must be between 2 and 100000"),
    (dict(probe_s=3.0), "probe_s=3.0 must be between 0 (no probe) and rpc_timeout_s=2.0"),
    (dict(suspect_s=0.05), "suspect_s=0.05 must be longer than heartbeat_s=0.05"),
    (dict(follower_margin_s=0.15), "follower_margin_s=0.15 must be >= 0 and under phi_floor_s=0.15"),
    (dict(detector="fixed", follower_margin_s=0.3), "follower_margin_s=0.3 must be >= 0 and under suspect_s=0.3"),
])
def test_bad_settings_are_refused_with_the_field(kw, words):
    with pytest.raises(ConfigError) as e:
        cfg(**kw)
    assert words in str(e.value)


def test_a_config_file_without_the_fields_loads_with_the_defaults(tmp_path):
    c = cfg()
    path = tmp_path / "cluster.json"
    c.save(path)
    import json
    data = json.loads(path.read_text())
    for k in ("detector", "phi_threshold", "phi_floor_s", "phi_pause_s", "phi_min_std_s", "phi_window", "probe_s"):
        del data[k]
    path.write_text(json.dumps(data))
    assert ClusterConfig.load(path).detector == "phi"


def test_the_scenario_block_maps_to_config_fields():
    spec = DetectorSpec(kind="phi", threshold=6, floor_s=0.2, probe_s=0)
    assert spec.config_fields() == {"detector": "phi", "phi_threshold": 6, "phi_floor_s": 0.2, "probe_s": 0}
    assert DetectorSpec().config_fields() == {"detector": "phi"}
    assert DetectorSpec(kind="fixed", suspect_s=0.5).config_fields() == {"detector": "fixed", "suspect_s": 0.5}


def test_a_scenario_with_a_bad_detector_names_the_scenario_field(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("name: s\ncluster:\n  detector: {kind: phi, floor_s: 0.01}\n"
                 "faults: []\nexpect: {checks: [no-lost-acks]}\n")
    with pytest.raises(ScenarioError) as e:
        load_scenario(p)
    msg = str(e.value)
    assert "cluster.detector" in msg and "floor_s=0.01 must be longer than heartbeat_s=0.05" in msg
    assert "phi_floor_s" not in msg
    p.write_text("name: s\ncluster:\n  detector: {kind: sometimes}\nfaults: []\nexpect: {checks: [no-lost-acks]}\n")
    with pytest.raises(ScenarioError, match="cluster.detector.kind"):
        load_scenario(p)
