import pytest

from pschaos.harness.errors import ScenarioError
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.machinery.tools import REPO


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path):
    sc = load_scenario(path)
    assert sc.name == path.stem


def write(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_error_names_file_line_and_field(tmp_path):
    p = write(tmp_path, "name: x\ncluster:\n  shards: 2\nfaults:\n  - at: {step: 3}\n    kind: kill\n"
                        "    target: primary(shard=zero)\n")
    with pytest.raises(ScenarioError) as e:
        load_scenario(p)
    msg = str(e.value)
    assert f"{p}:7: faults[0].target" in msg and "selector" in msg


def test_unknown_field_and_bad_kind(tmp_path):
    p = write(tmp_path, "name: x\ncluster:\n  shardz: 2\nfaults:\n  - at: {time: 1}\n    kind: explode\n"
                        "    target: shard-0/0\n")
    msg = str(pytest.raises(ScenarioError, load_scenario, p).value)
    assert ":3: cluster.shardz" in msg and ":6: faults[0].kind" in msg


def test_at_needs_exactly_one_of_time_or_step(tmp_path):
    p = write(tmp_path, "name: x\nfaults:\n  - at: {time: 1, step: 2}\n    kind: kill\n    target: etcd\n")
    assert "exactly one of time" in str(pytest.raises(ScenarioError, load_scenario, p).value)


def test_bad_yaml_and_bad_bound(tmp_path):
    assert ":2" in str(pytest.raises(ScenarioError, load_scenario, write(tmp_path, "name: x\n  : : [\n")).value)
    p = write(tmp_path, "name: x\nexpect:\n  metrics: ['failover_ms.p99 about 800']\n")
    assert "expect.metrics" in str(pytest.raises(ScenarioError, load_scenario, p).value)


def test_missing_file(tmp_path):
    assert "cannot read" in str(pytest.raises(ScenarioError, load_scenario, tmp_path / "none.yaml").value)


def test_workers_scale_under_bsp_and_the_member_ttl_is_bounded(tmp_path):
    scaled = ("name: x\ncluster:\n  training: {t}\n  member_ttl_s: {ttl}\nfaults:\n  - at: {{step: 3}}\n"
              "    kind: scale-out\n    params: {{count: 1}}\nexpect:\n  checks: [barrier-live]\n")
    assert load_scenario(write(tmp_path, scaled.format(t="bsp", ttl=2))).cluster.member_ttl_s == 2
    assert "member_ttl_s" in str(pytest.raises(ScenarioError, load_scenario,
                                               write(tmp_path, scaled.format(t="ssp", ttl=0))).value)
    assert "barrier-live needs cluster.training: bsp or ssp" in str(
        pytest.raises(ScenarioError, load_scenario, write(tmp_path, scaled.format(t="async", ttl=2))).value)
