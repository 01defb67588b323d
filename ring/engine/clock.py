"""The seconds a cell's process really spends in each pass, on a monotonic clock.

A stage starts the clock (:func:`start`) when it begins a cell and wraps each pass (:data:`PASSES`) and each fixed
cost (:data:`FIXED`) in :meth:`Clock.timing`; a nested timing's seconds belong to it, not to the one around it (a
checkpoint written inside a pretraining epoch is a checkpoint write, LA's k-means at an epoch's start is k-means).
:class:`ring.engine.provenance.Segment` writes :func:`record` into the segment it closes, so that every finished
cell says what each pass cost (``ring estimate --check`` compares it with the price).  With ``trace`` on (the price
suite, ``benchmarks/price.py``), every batch a pass consumes is stamped: the suite then times a pass past its warm-up
and its loader's prefetch, through the stage's own loop; it turns it on for a stage's process with
``RING_CLOCK_TRACE=1`` (:data:`TRACE_ENV`), and the segment keeps the stamps.

Each pass is timed twice: by the wall (``passes_s``) and by the process's CPU time (``passes_cpu_s``, every thread of
the process, not its loader workers' nor its children's).  A one-thread job on a CPU with its loader in process is
not charged for the time the host's other work holds its core, where its wall seconds are its CPU seconds divided by
the share of a core it got: the CPU's price is in the former (:mod:`ring.plan.estimate.pricing`), so that it can be
checked on a shared host (against figures of that host: a CPU second differs from one virtual machine to another).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

# The passes over images (each priced per image by ring.plan.estimate) and the fixed costs of a job (priced per job).
PASSES = ("pretraining", "kNN monitor", "k-means", "linear evaluation", "transfer", "detection")
FIXED = ("start and imports", "data check", "setup", "compile warm-up", "checkpoint writes")
TRACE_ENV = "RING_CLOCK_TRACE"


@dataclass
class Clock:
    trace: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # the process's CPU time, as ``seconds``
    images: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    # (pass, call number, monotonic seconds at the batch's end, images, process CPU seconds then) per batch, traced.
    stamps: list[tuple[str, int, float, int, float]] = field(default_factory=list)
    _stack: list[list] = field(default_factory=list)

    @contextmanager
    def timing(self, name: str):
        """Adds the seconds spent inside to ``name``, less those of a timing nested in it."""
        if name not in PASSES and name not in FIXED:
            raise ValueError(f"{name!r} is neither a pass {PASSES} nor a fixed cost {FIXED}.")
        self.calls[name] = self.calls.get(name, 0) + 1
        # name, wall and CPU start, wall and CPU seconds of the timings nested in it
        frame = [name, time.monotonic(), time.process_time(), 0.0, 0.0]
        self._stack.append(frame)
        try:
            yield self
        finally:
            self._stack.pop()
            spent, cpu = time.monotonic() - frame[1], time.process_time() - frame[2]
            self.add(name, spent - frame[3], cpu - frame[4])
            if self._stack:
                self._stack[-1][3] += spent
                self._stack[-1][4] += cpu

    def add(self, name: str, seconds: float, cpu_seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + cpu_seconds

    def count(self, name: str, images: int) -> None:
        """A batch of ``images`` of pass ``name`` is done."""
        self.images[name] = self.images.get(name, 0) + images
        if self.trace:
            self.stamps.append((name, self.calls.get(name, 0), time.monotonic(), images, time.process_time()))


CLOCK = Clock()
# The process's age and its CPU seconds when a stage's command line started it (entered()).
_entry_age: list[tuple[float, float]] = []
_trace = [os.environ.get(TRACE_ENV) == "1"]  # the price suite's: every clock started from now stamps its batches


def process_age_s() -> float | None:
    """Seconds since this process was created (Linux: its start time in /proc against the boot clock), or None."""
    try:
        fields = open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat(5): clock ticks after boot
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def entered() -> None:
    """A stage's ``main``: the interpreter's start and the imports so far count as the next cell's fixed cost."""
    age = process_age_s()
    _entry_age[:] = [(age, time.process_time())] if age is not None else []


def set_trace(on: bool) -> None:
    """The price suite's switch: the clocks of the cells it runs stamp every batch."""
    _trace[0] = on


def start() -> Clock:
    """A fresh clock for the cell this process begins (with the command line's start-up, if :func:`entered`)."""
    global CLOCK
    CLOCK = Clock(trace=_trace[0])
    if _entry_age:
        CLOCK.add("start and imports", *_entry_age.pop())
    return CLOCK


def timing(name: str):
    """:meth:`Clock.timing` of the current clock."""
    return CLOCK.timing(name)


def count(name: str, images: int) -> None:
    CLOCK.count(name, images)


def counted(name: str, batches):
    """``batches`` (a loader's (x, ...) tuples), each counted as pass ``name``'s once its consumer asks for the next:
    its stamp is the end of its work."""
    for batch in batches:
        yield batch
        count(name, len(batch[0]))


def record() -> dict:
    """What a segment keeps: wall and CPU seconds per pass and fixed cost (rounded to the ms), images per pass, calls
    of each (a pass's: epochs, monitor runs; a fixed cost's: checkpoints written), and with tracing the batches'
    stamps."""
    doc = {
        "passes_s": {k: round(v, 3) for k, v in CLOCK.seconds.items()},
        "passes_cpu_s": {k: round(v, 3) for k, v in CLOCK.cpu_seconds.items()},
        "pass_images": dict(CLOCK.images),
        "pass_calls": dict(CLOCK.calls),
    }
    if CLOCK.trace:
        doc["pass_stamps"] = [[name, call, round(t, 4), n, round(cpu, 4)] for name, call, t, n, cpu in CLOCK.stamps]
    return doc
