"""The GPU suite's checks of the GPU decoder, on the CPU: benchmarks/decode_pixels.py's comparison and bound, and
benchmarks/stream_sanitizer.py's arguments, its refusal without CUDA, and its planted fault as CUDA's sanitizer
(torch.cuda._sanitizer's happens-before analysis, which runs without a GPU) sees the decoder's ring hand it over."""

from __future__ import annotations

import itertools
import json
import threading

import numpy as np
import pytest
import torch
from torch.cuda import _sanitizer as csan

from benchmarks import decode_pixels, stream_sanitizer
from ring.data import gpu_decode
from tests.data.test_gpu_decode import jpeg_store  # noqa: F401  (40 noisy photo-like images, jpeg95 at 32 px)

CPU = torch.device("cpu")


def test_the_decoder_pipeline_on_a_cpu_hands_over_pils_pixels(jpeg_store):  # noqa: F811
    stats = decode_pixels.compare(jpeg_store, CPU, batch=8, batches=5, workers=0)
    assert stats["images"] == 40  # every record of the training split, through the ring's three buffers and back
    assert stats["max_abs_diff"] == stats["mean_abs_diff"] == 0  # torchvision's CPU decoder is libjpeg-turbo, as PIL
    assert decode_pixels.failures(stats) == []


def test_the_bound_is_two_compliant_decoders_and_refuses_a_planted_mismatch(jpeg_store):  # noqa: F811
    # The bound as the script derives it: IDCT samples within 2 of each other, B = Y + 1.772 (Cb - 128), each
    # decoder's own rounding; the mean's 0.11 from the transform with room for the conversion's rounding.
    assert decode_pixels.BOUND.max_abs_diff == int(2 + 1.772 * 2 + 1)
    assert 0.04 * (1 + 1.772) < decode_pixels.BOUND.mean_abs_diff < 1

    def planted(levels: int, everywhere: bool):
        def reference(reader, i):
            image = reader.array(i).astype(np.int16)
            if everywhere:
                image += levels
            else:  # one level of every image
                image[5, 7, 2] += levels if image[5, 7, 2] < 128 else -levels
            return np.clip(image, 0, 255).astype(np.uint8)

        return decode_pixels.compare(jpeg_store, CPU, batch=8, batches=1, workers=0, reference=reference)

    assert decode_pixels.failures(planted(6, everywhere=False)) == []  # at the bound
    (one,) = decode_pixels.failures(planted(7, everywhere=False))
    assert one.startswith("the GPU decoder's pixels differ from PIL's by up to 7 levels, over the 6 ")
    shifted = planted(1, everywhere=True)  # a level everywhere: within the largest difference, far over the mean
    (mean,) = decode_pixels.failures(shifted)
    assert shifted["max_abs_diff"] == 1 and "levels on average, over the 0.5 rounding allows" in mean
    assert all(s.endswith("do not use store_decode: gpu on this machine.") for s in (one, mean))


def test_the_pixel_check_writes_its_verdict_and_exits_by_it(jpeg_store, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setattr("benchmarks.common.RESULTS", tmp_path)
    assert decode_pixels.main(["--tiny", "--store", str(jpeg_store), "--device", "cpu", "--workers", "0"]) == 0
    result = json.loads((tmp_path / ".tiny-decode_pixels.json").read_text())
    assert result["status"] == "pass" and result["images"] == 16 and result["bound"]["max_abs_diff"] == 6
    monkeypatch.setattr(decode_pixels, "BOUND", decode_pixels.Bound(-1, 0.5))  # a bound nothing can meet
    assert decode_pixels.main(["--tiny", "--store", str(jpeg_store), "--device", "cpu", "--workers", "0"]) == 1
    assert json.loads((tmp_path / ".tiny-decode_pixels.json").read_text())["status"] == "fail"


def test_the_sanitizer_check_refuses_a_cpu_and_bad_arguments_in_one_sentence(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert stream_sanitizer.main([]) == 2
    said = capsys.readouterr().err.strip()
    assert said == stream_sanitizer.NO_CUDA and "\n" not in said and said.count(". ") == 0
    for argv, sentence in (
        (["--batches", "3"], "--batches 3: a buffer is rewritten only from batch 4 on; pass at least 4."),
        (["--variant", "planted"], "--variant needs --store, the jpeg95 store the run reads."),
    ):
        with pytest.raises(SystemExit) as exit_:
            stream_sanitizer.parse(argv)
        assert exit_.value.code == 2 and capsys.readouterr().err.strip().endswith(f"error: {sentence}")


class _Traced:
    """Streams and events of a device that is not there, reported to CUDA's sanitizer as the real ones are (its gpu
    trace's callbacks), with each buffer's reads and writes reported as kernels."""

    ids = itertools.count(1)

    def __init__(self, handler: csan.EventHandler):
        self.handler = handler
        self.consumer = self.stream()

    def stream(self) -> int:
        stream = next(self.ids)
        self.handler._handle_stream_creation(stream)
        return stream

    def current(self) -> int:
        return self.consumer

    def event(self):
        handler, event = self.handler, next(self.ids)
        handler._handle_event_creation(event)

        class Event:
            id = event

            def record(self, stream) -> None:
                handler._handle_event_record(event, stream)

            def synchronize(self) -> None:  # a host wait: every stream is ordered after what the event covers
                handler._handle_event_synchronization(event)

        return Event()

    def wait(self, stream, event) -> None:
        self.handler._handle_event_wait(event.id, stream)

    def access(self, stream: int, slot: int, write: bool) -> list:
        buffer = 1000 + slot
        read_only, written = (set(), {buffer}) if write else ({buffer}, set())
        return self.handler._handle_kernel_launch(stream, read_only, written, set(), "kernel", {buffer: ["buffer"]})


@pytest.mark.parametrize("ring", [gpu_decode.SlotRing, stream_sanitizer.WrongStreamRing])
def test_the_sanitizer_finds_no_race_in_the_ring_and_catches_the_planted_release(ring):
    """The handover of 8 batches through the ring's 3 slots: the decoder writes a slot on its stream, the training
    stream reads it; the shipped ring orders every rewrite after the reads, the planted one (the script's) does not."""
    sync = _Traced(csan.EventHandler())
    producer = sync.stream()
    slots = ring(gpu_decode.SLOTS, sync, producer)
    stop, races = threading.Event(), []
    for batch in range(8):
        slot = slots.claim(stop)
        races += sync.access(producer, slot, write=True)
        slots.publish(slot, batch)
        taken, payload = slots.take()
        assert payload == batch
        races += sync.access(sync.consumer, taken, write=False)
        slots.release(taken)
    if ring is gpu_decode.SlotRing:
        assert races == []
    else:  # each slot's rewrite from batch 4 on races its reads of the batch before
        assert len(races) == 8 - gpu_decode.SLOTS
        assert all(r.current_access.stream == producer and r.previous_access.stream == sync.consumer for r in races)
