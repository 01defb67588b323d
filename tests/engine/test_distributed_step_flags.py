"""Two gloo processes agree to stop without a host read at every step (issue 31, item 3).

A blocking all-reduce of the stop and checkpoint flags after every step made every rank wait for its device
before queuing the next step.  One preempted 2-process run of real IR steps counts, per step, every read of a
tensor value on the host: the Python reads (``.tolist``, ``.item``, ``.cpu``, ``.numpy``, ``int``/``float``/
``bool`` of a tensor) and the ATen calls that end in one (``aten::_local_scalar_dense``, ``aten::item``, counted
under a dispatch mode, which sees every ATen call of the process's thread).
"""

import json
import os
from collections import Counter

import pytest
import torch
import torch.multiprocessing as mp
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from ring.engine.distributed import StepFlags
from tests.engine.test_distributed import free_port
from tests.helpers import pretrain_config

# Rank 1 alone is asked to stop during its 6th step; the flags are read every 4 steps (8 in training), so that
# the run stops at its 9th step after one read step (the 5th) that does not stop.
EVERY, STOP_RANK, STOP_AT = 4, 1, 6
READS = ("tolist", "item", "cpu", "numpy", "__int__", "__float__", "__bool__", "__index__")
READ_OPS = ("aten::_local_scalar_dense", "aten::item")


class _ReadOps(TorchDispatchMode):
    """Counts the ATen calls that read a tensor value on the host, by the step they happen in."""

    def __init__(self, reads: Counter, step: list):
        super().__init__()
        self.reads, self.step = reads, step

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.name() in {op.split("::")[1] for op in READ_OPS}:
            self.reads[self.step[0]] += 1
        return func(*args, **(kwargs or {}))


class _Unread:
    """A loader whose batches are made uncounted: the CPU pipeline reads its own random draws (crop boxes, flips)
    on the host, in the loader's worker processes on a GPU node; the test counts what the training loop reads."""

    def __init__(self, loader, counting: list):
        self.loader, self.counting = loader, counting

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        batches = iter(self.loader)
        while True:
            self.counting[0] = False
            try:
                with _disable_current_modes():
                    batch = next(batches)
            except StopIteration:
                return
            finally:
                self.counting[0] = True
            yield batch


def _rank(rank: int, world: int, port: int, cell: str, out: str) -> None:
    """One rank of a preempted run: writes the step it stopped at and its host reads per step."""
    os.environ.update(
        WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    import ring.pretrain
    from ring.core import stop
    from ring.engine import distributed
    from ring.pretrain import Pretraining

    distributed.FLAGS_EVERY = EVERY
    counting = [True]
    make_loader = ring.pretrain.make_loader
    ring.pretrain.make_loader = lambda *args, **kwargs: _Unread(make_loader(*args, **kwargs), counting)

    # 16 images per rank and step, 16 px: 42 steps an epoch; no loss read but an epoch's first and last.
    cfg = pretrain_config(
        "IR", epochs=1, batch_size=32, resize=16, crop=16, knn_every=0, threads=1, loss_read_every=10**6
    )
    run = Pretraining(cfg, cell)
    reads, step = Counter(), [0]  # step[0]: the training step the loop is in (0 before the first)
    train_step = run.train_step

    def counted_step(views, index):
        step[0] += 1
        if rank == STOP_RANK and step[0] == STOP_AT:
            stop.request_stop()  # SLURM's USR2, delivered to one rank's job wrapper
        return train_step(views, index)

    run.train_step = counted_step
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def counted_read(name):
        def read(self, *args, **kwargs):
            reads[step[0]] += counting[0]
            return originals[name](self, *args, **kwargs)

        return read

    for name in READS:
        setattr(torch.Tensor, name, counted_read(name))
    stopped = None
    try:
        with _ReadOps(reads, step):
            run.run()
    except stop.Preempted:
        stopped = run.step_in_epoch
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "stopped": stopped,
                "steps": step[0],
                "reads": {str(k): v for k, v in reads.items()},
                "close": _close_answers(rank),
            },
            f,
        )
    distributed.shutdown()


def _close_answers(rank: int) -> list[bool]:
    """What StepFlags.close answers on this rank when only rank 1 asked: in the reduction still in flight at a
    loop's end (asked at the read step EVERY, the loop's last), or at the close itself."""
    in_flight = StepFlags(1, every=EVERY)
    answers = [in_flight(rank == 1 and step == EVERY)[0] for step in range(1, EVERY + 1)]
    return answers + [in_flight.close(False)[0], StepFlags(1, every=EVERY).close(rank == 1)[0]]


@pytest.fixture(scope="module")
def preempted(module_tmp) -> list[dict]:
    """Both ranks' reports of one preempted run (two processes, 9 steps each)."""
    tmp = module_tmp("flags")
    names = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    before = {name: os.environ.get(name) for name in names}
    mp.spawn(_rank, args=(2, free_port(), str(tmp / "cell"), str(tmp)), nprocs=2, join=True)
    assert before == {name: os.environ.get(name) for name in names}
    reports = [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(2)]
    for report in reports:
        report["reads"] = {int(k): v for k, v in report["reads"].items()}
    reports.append({"checkpoint": torch.load(tmp / "cell" / "checkpoint.pt", weights_only=True)["step_in_epoch"]})
    return reports


@pytest.mark.slow  # two processes of real training steps (about 20 s of CPU)
def test_a_stop_asked_of_one_rank_stops_both_at_the_same_step_soon(preempted):
    *ranks, saved = preempted
    assert ranks[0]["stopped"] == ranks[1]["stopped"] == saved["checkpoint"], preempted
    # The request, made during step STOP_AT, is sent at the next multiple of EVERY and read a step later.
    assert STOP_AT < ranks[0]["stopped"] <= STOP_AT + EVERY
    assert ranks[0]["stopped"] == -(-STOP_AT // EVERY) * EVERY + 1
    assert ranks[0]["steps"] == ranks[1]["steps"] == ranks[0]["stopped"]  # no rank ran a step past the stop


@pytest.mark.slow  # two processes of real training steps (about 20 s of CPU)
def test_a_request_in_flight_at_the_loops_end_is_answered_by_close_on_every_rank(preempted):
    *ranks, _ = preempted
    for report in ranks:
        assert report["close"] == [False] * EVERY + [True, True]


@pytest.mark.slow  # two processes of real training steps (about 20 s of CPU)
def test_the_ranks_read_the_host_only_at_the_read_steps(preempted):
    """The host reads the flags sent EVERY steps apart one step after sending them, the losses after the first
    step, and everything before the checkpoint of the last step; no other step reads a value."""
    *ranks, _ = preempted
    stopped = ranks[0]["stopped"]
    read_steps = {1, stopped} | set(range(EVERY + 1, stopped, EVERY))
    assert len(read_steps) == 3  # the first step, one read that does not stop, the stop
    for rank, report in enumerate(ranks):
        stray = {step: n for step, n in report["reads"].items() if n and 0 < step and step not in read_steps}
        assert not stray, f"rank {rank} read values on the host after steps {stray} (read steps {sorted(read_steps)})"
        # Not passing by counting nothing: the flags' reads (a .tolist of the reduced flags) are seen.
        assert all(report["reads"].get(step) for step in read_steps - {1}), report["reads"]


def test_in_one_process_the_flags_are_answered_at_once_and_close_adds_nothing():
    flags = StepFlags(2, every=4)
    assert [flags(step == 2, False) for step in range(1, 4)] == [(False, False), (True, False), (False, False)]
    assert flags.close(True, True) == (False, False)  # every step was answered as it came
    with pytest.raises(ValueError, match="made for 2 flags and was given 1"):
        flags(True)


def test_the_process_group_is_joined_with_the_stated_timeout(monkeypatch):
    """A rank lost with its node must not hold the others' GPUs for NCCL's or gloo's own default."""
    import datetime

    from ring.engine import distributed

    joined = {}
    monkeypatch.setattr(distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(
        distributed.dist, "init_process_group", lambda backend, **kw: joined.update(kw, backend=backend)
    )
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    assert distributed.init_from_env("cpu")
    assert joined == {"backend": "gloo", "rank": 2, "world_size": 4, "timeout": datetime.timedelta(minutes=30)}
