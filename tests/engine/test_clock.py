"""ring.engine.clock: each pass's seconds, a nested one's not counted twice, and what a segment records."""

import json
import time

import pytest

from ring.engine import clock, provenance


def test_a_nested_timing_is_its_own_and_not_the_outer_ones():
    c = clock.start()
    with c.timing("pretraining"):
        time.sleep(0.05)
        with c.timing("checkpoint writes"):
            time.sleep(0.1)
    # The outer pass holds its own 0.05 s only: the 0.1 s write inside it is the write's.
    assert 0.1 <= c.seconds["checkpoint writes"] < 0.2
    assert 0.05 <= c.seconds["pretraining"] < 0.1
    assert c.calls == {"pretraining": 1, "checkpoint writes": 1}
    with pytest.raises(ValueError, match="neither a pass"):
        with c.timing("pretrain"):
            pass


def test_counted_batches_are_stamped_at_the_end_of_their_work_when_tracing():
    clock.set_trace(True)
    try:
        c = clock.start()
        stamps = []
        for _batch in clock.counted("kNN monitor", [([0] * 4,), ([0] * 3,)]):
            stamps.append(time.monotonic())
            time.sleep(0.02)
    finally:
        clock.set_trace(False)
    assert c.images == {"kNN monitor": 7}
    # Each batch's stamp comes after its consumer's work on it, not when the loader handed it over.
    assert [s[3] for s in c.stamps] == [4, 3]
    assert all(stamp[2] >= t + 0.02 for stamp, t in zip(c.stamps, stamps, strict=True))
    assert not clock.start().trace  # the switch is off again


def test_the_command_lines_start_up_is_the_next_cells_first_fixed_cost():
    age = clock.process_age_s()
    assert age is not None and age > 0  # this interpreter started before this test
    clock.entered()
    c = clock.start()
    assert c.seconds["start and imports"] >= age
    assert "start and imports" not in clock.start().seconds  # once: the next cell of the process has none


def test_a_segment_records_the_seconds_of_each_pass(tmp_path):
    clock.start()
    with clock.timing("setup"):
        time.sleep(0.01)
    with provenance.Segment(tmp_path, "hash", 0):
        with clock.timing("linear evaluation"):
            clock.count("linear evaluation", 64)
    segment = json.loads((tmp_path / provenance.FILE).read_text())["segments"][-1]
    assert set(segment["passes_s"]) == {"setup", "linear evaluation"}
    assert segment["passes_s"]["setup"] >= 0.01
    assert segment["pass_images"] == {"linear evaluation": 64}
    assert segment["pass_calls"] == {"setup": 1, "linear evaluation": 1}
    assert "pass_stamps" not in segment  # only the price suite's runs keep every batch's stamp


def test_each_pass_is_timed_on_the_wall_and_on_the_processs_cpu():
    """A pass waiting (here asleep, as a job waits for a core on a busy host) spends wall seconds and no CPU seconds;
    one computing spends both, and a nested timing's CPU seconds are its own."""
    c = clock.start()
    with c.timing("pretraining"):
        time.sleep(0.2)
        with c.timing("checkpoint writes"):
            end = time.process_time() + 0.1
            while time.process_time() < end:
                pass
    # A sleep wakes within a few ms on any host; the busy loop's 0.1 s of CPU is counted by the process's clock.
    assert c.seconds["pretraining"] >= 0.2 and c.cpu_seconds["pretraining"] < 0.05
    assert c.cpu_seconds["checkpoint writes"] >= 0.1 and c.seconds["checkpoint writes"] >= 0.1
    assert set(clock.record()["passes_cpu_s"]) == {"pretraining", "checkpoint writes"}
