"""The Docker backend fails closed where the engine can quietly do less than asked: each test
drives the backend's own code against a fake engine object that answers as a real one did."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.backend_docker import DockerBackend
from harness.errors import HarnessError
from harness.faults import params_error


class FakeContainer:
    """Answers `update` as dockerd does, and keeps what a reload would read back."""

    def __init__(self, warnings=None, applies: bool = True) -> None:
        self.warnings, self.applies = warnings, applies
        self.attrs = {"HostConfig": {"CpuQuota": 0, "CpuPeriod": 0}}

    def update(self, **kw):
        if self.applies and "cpu_quota" in kw and kw["cpu_quota"]:    # the SDK drops a falsy quota
            self.attrs["HostConfig"]["CpuQuota"] = kw["cpu_quota"]
        return {"Warnings": self.warnings}

    def reload(self) -> None:
        pass


def backend(c: FakeContainer):
    return SimpleNamespace(handle=lambda name: SimpleNamespace(container=c))


def test_a_zero_cpu_quota_is_refused_naming_the_field():
    err = params_error("cpu-throttle", {"cpus": 0})
    assert err and "params.cpus" in err and "0.01" in err
    assert params_error("cpu-throttle", {"cpus": 0.01}) is None


def test_cpu_quota_is_read_back():
    c = FakeContainer()
    assert DockerBackend.limit_cpu(backend(c), "shard-0/0", 0.25) == 25_000
    assert DockerBackend.limit_cpu(backend(c), "shard-0/0", None) == -1


def test_engine_warnings_fail_the_throttle():
    c = FakeContainer(warnings=["Your kernel does not support CPU cfs quota. Quota discarded."], applies=False)
    with pytest.raises(HarnessError, match="cpu-throttle shard-0/0.*did not apply.*cfs quota"):
        DockerBackend.limit_cpu(backend(c), "shard-0/0", 0.1)


def test_a_quota_the_engine_does_not_report_fails_the_throttle():
    with pytest.raises(HarnessError, match="reports 0"):
        DockerBackend.limit_cpu(backend(FakeContainer(applies=False)), "shard-0/0", 0.1)
