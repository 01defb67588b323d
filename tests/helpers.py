"""Small configs on the embedded digits data, shared by the stage tests."""

import subprocess
import sys

from ring import config as C
from ring.methods import METHODS, apply_fixed

TINY_PRETRAIN = dict(
    dataset="digits", epochs=2, batch_size=64, lr_milestones=[1], resize=32, crop=32,
    bank_negatives=256, queue_size=256, bn_groups=2, ring_anneal_epochs=1,
    knn_every=1, num_workers=0,
)

TINY_LINCLS = dict(dataset="digits", epochs=3, batch_size=64, resize=32, crop=32, augmentation="none", num_workers=0)


def pretrain_config(method: str, **overrides) -> C.PretrainConfig:
    """A tiny config with the method's defining values set, as a grid sets them (ring.methods.apply_fixed)."""
    values = {**TINY_PRETRAIN, **overrides}
    if method in METHODS:
        values = apply_fixed(method, values)
    return C.PretrainConfig(method=method, **values)


def lincls_config(**overrides) -> C.LinclsConfig:
    return C.LinclsConfig(**{**TINY_LINCLS, **overrides})


def run_module(module: str, *args, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          check=check, **kwargs)
