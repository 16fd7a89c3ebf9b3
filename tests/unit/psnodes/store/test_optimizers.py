"""PS-side optimizers agree with torch.optim on the same gradient sequence."""
import numpy as np
import pytest
import torch

from pschaos.psnodes.errors import ConfigError
from pschaos.psnodes.store.optimizers import OptimizerConfig, apply_update


@pytest.mark.parametrize("name", ["sgd", "adagrad", "adam"])
def test_matches_torch(name):
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=(5, 3)).astype(np.float32)
    grads = [rng.normal(size=(5, 3)).astype(np.float32) for _ in range(20)]
    cfg = OptimizerConfig(name, lr=0.05, initial_accumulator=0.1, eps=1e-8)
    ours = p0.copy()
    slots = cfg.new_slots(p0.shape)
    tp = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = {"sgd": lambda: torch.optim.SGD([tp], lr=0.05),
           "adagrad": lambda: torch.optim.Adagrad([tp], lr=0.05, initial_accumulator_value=0.1, eps=1e-8),
           "adam": lambda: torch.optim.Adam([tp], lr=0.05, eps=1e-8)}[name]()
    for t, g in enumerate(grads, 1):
        apply_update(cfg, ours, g, slots, t)
        tp.grad = torch.from_numpy(g.copy())
        opt.step()
    np.testing.assert_allclose(ours, tp.detach().numpy(), rtol=2e-4, atol=2e-5)


def test_unknown_optimizer_is_a_config_error():
    with pytest.raises(ConfigError, match="optimizer.name='rmsprop'"):
        OptimizerConfig("rmsprop")
    with pytest.raises(ConfigError, match="optimizer.lr"):
        OptimizerConfig("sgd", lr=-1)
