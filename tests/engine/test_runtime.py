"""ring.engine.runtime: device choice, threads, the epoch's batches as a pure function of (seed, epoch), the loader
that draws nothing from the global RNG, and the stages' timer."""

import time

import pytest
import torch
from torch.utils.data import TensorDataset

from ring.core import stop
from ring.engine import runtime


def test_auto_picks_the_cpu_without_cuda_and_a_named_cuda_device_is_refused_in_one_sentence(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.pick_device("auto") == torch.device("cpu")
    assert runtime.pick_device("cpu") == torch.device("cpu")
    with pytest.raises(RuntimeError, match=r"^device=cuda:1 was requested but no CUDA device is visible; use device"):
        runtime.pick_device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert runtime.pick_device("auto") == torch.device("cuda")
    assert runtime.pick_device("cuda:1") == torch.device("cuda", 1)


def test_threads_are_set_when_positive_and_left_alone_at_zero():
    before = torch.get_num_threads()
    try:
        runtime.setup_threads(1)
        assert torch.get_num_threads() == 1
        runtime.setup_threads(0)  # 0: torch's own choice stays
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_an_epochs_batches_are_a_pure_function_of_seed_and_epoch():
    batches = runtime.epoch_batches(10, 3, seed=1, epoch=2)
    assert [len(b) for b in batches] == [3, 3, 3]  # drop_last: the 10th image waits for another epoch
    assert len(set(sum(batches, []))) == 9 and set(sum(batches, [])) <= set(range(10))
    assert runtime.epoch_batches(10, 3, seed=1, epoch=2) == batches  # a resumed epoch sees the same order
    assert runtime.epoch_batches(10, 3, seed=1, epoch=3) != batches
    assert runtime.epoch_batches(10, 3, seed=2, epoch=2) != batches
    # The order is torch.randperm under the documented seed; the global RNG plays no part.
    torch.manual_seed(123)
    expected = torch.randperm(10, generator=torch.Generator().manual_seed(1 * 100_003 + 2)).tolist()
    assert sum(batches, []) == expected[:9]


def test_unshuffled_batches_keep_the_order_and_may_keep_the_last_partial_batch():
    assert runtime.epoch_batches(7, 3, 0, 0, shuffle=False) == [[0, 1, 2], [3, 4, 5]]
    assert runtime.epoch_batches(7, 3, 0, 0, shuffle=False, drop_last=False) == [[0, 1, 2], [3, 4, 5], [6]]
    assert runtime.epoch_batches(2, 3, 0, 0) == []  # fewer images than a batch: no step


def test_the_loader_yields_the_given_batches_and_leaves_the_global_rng_alone():
    data = TensorDataset(torch.arange(8) * 10)
    batches = runtime.epoch_batches(8, 4, seed=0, epoch=0)
    state = torch.get_rng_state()
    loader = runtime.make_loader(data, batches, 0, torch.device("cpu"))
    seen = [b[0].tolist() for b in loader]
    assert seen == [[10 * i for i in batch] for batch in batches]
    assert torch.equal(torch.get_rng_state(), state)  # an objective's draws stay those of an uninterrupted run
    assert not loader.pin_memory
    keep = runtime.make_loader(data, batches, 0, torch.device("cpu"), collate_fn=list)  # JPEG bytes stay a list
    assert [len(b) for b in keep] == [4, 4] and isinstance(next(iter(keep)), list)


def test_the_timer_counts_minutes_from_its_start_or_last_reset(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    timer = runtime.Timer()
    now[0] += 90.0
    assert timer.minutes() == 1.5
    timer.reset()
    now[0] += 30.0
    assert timer.minutes() == 0.5


def test_the_stop_request_is_re_exported_from_the_torch_free_module():
    assert (stop.Preempted, stop.request_stop, stop.stop_requested) == (
        stop.Preempted,
        stop.request_stop,
        stop.stop_requested,
    )
