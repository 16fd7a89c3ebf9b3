"""Workers train real torch models against the cluster; BSP and SSP bound staleness, async does not."""
import pytest
import torch

from pschaos.harness.history.events import read_events
from pschaos.harness.machinery.procs import wait_until


def lead(be, steps):
    """How far worker-0 ran ahead: max over its steps s of s - (worker-1's last clock invoked before it)."""
    w0 = read_events(be.events_path("worker-0"))
    w1 = read_events(be.events_path("worker-1"))
    invokes = sorted((e["t"], e["value"]["clock"]) for e in w1 if e["f"] == "push" and e["type"] == "invoke")
    worst = 0
    for e in w0:
        if e["f"] != "train-step":
            continue
        done = max((c for t, c in invokes if t < e["t"]), default=-1)
        worst = max(worst, e["value"]["step"] - done - 1)
    return worst


@pytest.mark.long
@pytest.mark.parametrize("mode,staleness,bound", [("bsp", 0, 0), ("ssp", 2, 2)])
def test_staleness_is_bounded(make_cluster, mode, staleness, bound):
    """`make test-long` only: in `make test` the staleness check bounds the same lead on processes in
    ssp-straggler (a straggler that reaches staleness 2) and the four bsp-* scenarios (staleness 0)."""
    be = make_cluster(shards=2, copies=2, workers=2, training=mode, staleness=staleness, model="mlp")
    be.start_worker("worker-0", 40)
    be.start_worker("worker-1", 40, step_delay=0.05)      # the slow one
    assert be.wait_workers(180)
    assert lead(be, 40) <= bound


@pytest.mark.long
def test_async_mode_lets_a_fast_worker_run_ahead(make_cluster):
    """The negative control of test_staleness_is_bounded, with it in `make test-long`."""
    be = make_cluster(shards=2, copies=2, workers=2, training="async", model="mlp")
    be.start_worker("worker-0", 60)
    be.start_worker("worker-1", 60, step_delay=0.1)
    assert be.wait_workers(180)
    assert lead(be, 60) > 2      # the negative control: without SSP the lead is not bounded


@pytest.mark.long
def test_widedeep_reaches_its_target_loss(make_cluster):
    """`make test-long` only: replica-restart-catchup trains widedeep on processes in `make test`,
    and its converged check holds every worker to the model's target loss."""
    be = make_cluster(shards=2, copies=2, workers=1, training="async", model="widedeep", tables=None)
    be.start_worker("worker-0", 250)
    assert be.wait_workers(240)
    done = [e["value"] for e in read_events(be.events_path("worker-0")) if e["f"] == "train-done"]
    assert done and done[0]["final_loss"] <= done[0]["target_loss"], done


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible: the GPU worker path needs one")
def test_gpu_worker_trains_on_cuda(make_cluster):
    be = make_cluster(shards=1, copies=1, workers=1, model="mlp", device="cuda")
    be.start_worker("worker-0", 100)
    assert be.wait_workers(240)
    done = [e["value"] for e in read_events(be.events_path("worker-0")) if e["f"] == "train-done"][0]
    assert done["device"].startswith("cuda") and done["final_loss"] <= done["target_loss"]
