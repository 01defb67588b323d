"""Pretraining cells for the pretraining tests (tests/test_pretrain.py, tests/test_pretrain_resume.py): a cell run as
the workflow runs it, or in this process, and a module's finished cells shared between its tests."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from ring.core.config import save, to_dict
from ring.pretrain import Pretraining
from tests.helpers import run_module


def run_cell(tmp_path, name, cfg):
    cell = tmp_path / name
    cell.mkdir()
    save(cfg, cell / "config.yaml")
    run_module("ring.pretrain", "--config", cell / "config.yaml", "--out", cell)
    return cell


def train_here(tmp_path, name, cfg):
    """``cfg``'s cell trained in this process: for tests of what a cell holds, not of its process (a stage process
    costs ~3.5 s of imports; the same weights, bit for bit: the preempted k-means test compares the two)."""
    Pretraining(cfg, tmp_path / name).run()
    return tmp_path / name


@pytest.fixture(scope="module")
def trained(module_tmp):
    """``trained(cfg)``: the finished cell of ``cfg``, trained once for the module as ``run_cell`` trains it (its own
    process, the same threads).  Several tests train one config only to compare against it or to edit it: training on
    the CPU is deterministic for a given process and thread count, so one run serves them all.  Read it; copy it
    (``copied_cell``) before changing it.  Its checkpoints are dropped (keep_checkpoint: none, a runtime key: the same
    run) unless ``checkpoint``: the module's cells stand until its last test, about 150 MB each with them."""
    cells = {}

    def train(cfg, checkpoint: bool = False):
        cfg = cfg if checkpoint else dataclasses.replace(cfg, keep_checkpoint="none")
        key = json.dumps(to_dict(cfg), sort_keys=True)  # every value, runtime keys included
        if key not in cells:
            cells[key] = run_cell(module_tmp("trained"), "cell", cfg)
        return cells[key]

    return train


def copied_cell(trained, tmp_path, name, cfg):
    """A copy of ``cfg``'s finished cell at ``tmp_path / name``, as the run left it (its last checkpoint kept)."""
    return Path(shutil.copytree(trained(cfg, checkpoint=True), tmp_path / name, symlinks=True))


def assert_same_weights(a, b):
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key
