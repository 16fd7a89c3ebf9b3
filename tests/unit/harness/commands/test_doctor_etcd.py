"""`pschaos doctor` refuses an etcd without the /v3/ gateway, and PSCHAOS_<TOOL> picks a binary
(how make test runs the etcd-facing tests on etcd 3.5 beside Debian's 3.4)."""
from pschaos.harness.commands.doctor import etcd_problem
from pschaos.harness.machinery import tools


def test_an_etcd_older_than_3_4_is_refused_with_the_fix():
    assert etcd_problem("etcd Version: 3.4.23") is None and etcd_problem("etcd Version: 3.5.17") is None
    why = etcd_problem("etcd Version: 3.3.25")
    assert "3.3.25" in why and "/v3/" in why and "install" in why
    assert "cannot read" in etcd_problem("something else")


def test_pschaos_tool_variable_picks_the_binary(tmp_path, monkeypatch):
    fake = tmp_path / "etcd-3.9"
    fake.write_text("#!/bin/sh\necho 'etcd Version: 3.9.0'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PSCHAOS_ETCD", str(fake))
    assert tools.find("etcd") == str(fake) and tools.version("etcd") == "etcd Version: 3.9.0"
    monkeypatch.setenv("PSCHAOS_ETCD", str(tmp_path / "missing"))
    assert tools.find("etcd") is None                    # a named binary that is not there is missing, not another one
