"""ring.data.gpu_decode: the buffer ring's handover under fake streams that run only when waited for, and the decoder's
pipeline on the CPU (torchvision's CPU decoder) against the workers' PIL decode of the same store, bit for bit.

The fake device is the worst schedule the real one allows: a queued operation runs only when an event after it is
waited for on the host, or when a stream that waits for it runs; a "hardware" write lands when it is called, whatever
is queued (nvJPEG's engine, torchvision PR 9606 / torchcodec PR 1634)."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import default_collate

from ring import prepare
from ring.data import augment, gpu_decode, store, store_layout, views
from ring.engine.runtime import epoch_batches, make_loader

CPU = torch.device("cpu")
pytestmark = pytest.mark.timeout(120)  # a handover that deadlocks fails here, not at the suite's limit
LOCK = threading.RLock()


class FakeStream:
    def __init__(self):
        self.queued, self.ran = [], 0

    def run_to(self, mark: int) -> None:
        with LOCK:
            while self.ran < mark:
                op = self.queued.pop(0)
                self.ran += 1
                op()

    def enqueue(self, op) -> None:
        with LOCK:
            self.queued.append(op)


class FakeEvent:
    def __init__(self):
        self.stream, self.mark = None, 0

    def record(self, stream) -> None:
        with LOCK:
            self.stream, self.mark = stream, stream.ran + len(stream.queued)

    def query(self) -> bool:
        return self.stream is None or self.stream.ran >= self.mark

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.run_to(self.mark)


class FakeSync:
    """Two streams, the consumer's current one and the producer's."""

    def __init__(self):
        self.consumer = FakeStream()

    def stream(self):
        return FakeStream()

    def current(self):
        return self.consumer

    def event(self):
        return FakeEvent()

    def wait(self, stream, event) -> None:
        stream.enqueue(event.synchronize)  # a device-side wait: the stream runs the event's work first

    def use(self, stream):
        raise AssertionError("the ring never switches streams")


class NoReleaseWait(gpu_decode.SlotRing):
    """A broken ring: it rewrites a slot without waiting for its reader's release event."""

    def claim(self, stop):
        slot, _released = self._free.get()
        self._claimed.add(slot)
        return slot


class NoReadyWait(gpu_decode.SlotRing):
    """A broken ring: it hands a slot over without waiting for the producer's writes."""

    def publish(self, slot, payload):
        self._claimed.remove(slot)
        self._full.put(gpu_decode._Published(slot, FakeEvent(), payload))


def _handover(ring_type, write: str, batches: int = 40, slots: int = 3, seed: int = 0) -> list[tuple[int, int]]:
    """Every batch through a ring: the producer writes batch i's number into its slot (``hardware``: when called;
    ``kernel``: queued on its stream), the consumer queues a read of the slot on its stream and releases it.  Returns
    (batch taken, what its read saw) in the order the reads ran."""
    sync = FakeSync()
    producer = sync.stream()
    ring = ring_type(slots, sync, producer)
    buffers, seen, rng = [None] * slots, [], random.Random(seed)

    def produce():
        try:
            for i in range(batches):
                slot = ring.claim(threading.Event())
                if write == "hardware":
                    buffers[slot] = i
                else:
                    producer.enqueue(lambda slot=slot, i=i: buffers.__setitem__(slot, i))
                time.sleep(rng.random() * 1e-4)
                ring.publish(slot, i)
            ring.finish()
        except BaseException as err:  # noqa: BLE001 (raised by the consumer's take)
            ring.finish(err)

    thread = threading.Thread(target=produce)
    thread.start()
    while (taken := ring.take()) is not None:
        slot, i = taken
        sync.consumer.enqueue(lambda slot=slot, i=i: seen.append((i, buffers[slot])))
        time.sleep(rng.random() * 1e-4)
        ring.release(slot)
    thread.join()
    FakeEvent.record(end := FakeEvent(), sync.consumer)
    end.synchronize()
    return seen


@pytest.mark.parametrize("write", ["hardware", "kernel"])
def test_every_read_sees_its_own_batch_in_order(write):
    for seed in range(3):
        assert _handover(gpu_decode.SlotRing, write, seed=seed) == [(i, i) for i in range(40)]


def test_a_ring_that_rewrites_a_slot_before_its_release_fired_is_caught():
    # The hardware decoder writes when called: without the host wait, it overwrites batches still queued for reading.
    assert _handover(NoReleaseWait, "hardware") != [(i, i) for i in range(40)]


def test_a_ring_that_hands_over_a_slot_before_it_was_written_is_caught():
    seen = _handover(NoReadyWait, "kernel")
    assert [i for i, _ in seen] == list(range(40)) and seen != [(i, i) for i in range(40)]


def test_a_slot_is_released_only_after_its_reads_and_a_stopped_feed_frees_every_slot():
    sync = FakeSync()
    ring = gpu_decode.SlotRing(2, sync, sync.stream())
    stop = threading.Event()
    a = ring.claim(stop)
    ring.publish(a, "a")
    slot, _ = ring.take()
    read = []
    sync.consumer.enqueue(lambda: read.append(slot))
    ring.release(slot)
    assert read == []  # queued, not run: the release event has not fired
    b = ring.claim(stop)
    ring.publish(b, "b")
    assert ring.claim(stop) == a and read == [a]  # claiming slot a ran its reader's work first
    ring.take()  # b is held by the consumer when the feed stops
    ring.reset()
    assert sorted(s for s, _ in list(ring._free.queue)) == [0, 1] and not ring._held
    stop.set()
    ring.finish(ValueError("a damaged record"))
    with pytest.raises(ValueError, match="a damaged record"):
        ring.take()


# -- the decoder's pipeline on the CPU ---------------------------------------------------------------------------------
SIZE = 32


@pytest.fixture(scope="module")
def jpeg_store(tmp_path_factory) -> Path:
    """A jpeg95 store of 40 noisy photo-like images in two classes, at 32 px."""
    folder = tmp_path_factory.mktemp("decode") / "photos"
    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("val", 4)):
        for i in range(n):
            (folder / split / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
            small = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((48, 36), Image.BICUBIC)
            noisy = np.clip(np.asarray(small) + rng.normal(0, 20, (36, 48, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(noisy).save(folder / split / f"c{i % 2}" / f"{i:03d}.jpg", quality=90)
    prepare.build(prepare.Target.of_folder(folder, "jpeg95", SIZE, shard_images=16), workers=1)
    return store_layout.store_dir(folder, "jpeg95", SIZE)


def _pipelines(jpeg_store, workers: int, epoch: int = 0, start: int = 0):
    reader = store.StoreReader(jpeg_store, "train")
    params = augment.ViewParams(SIZE, 0.2)
    order = epoch_batches(len(reader), 8, 3, epoch)[start:]
    made = {}
    for place in ("cpu", "gpu"):
        maker = augment.DeviceViews(None, CPU, SIZE, 24, (0.5,) * 3, (0.25,) * 3)
        tv = views.store_views(reader, params, 2, 7, maker, local_batch=8, place=place)
        tv.dataset.set_epoch(epoch)
        loader = make_loader(tv.dataset, order, workers, CPU, collate_fn=tv.collate)
        batches = []
        for batch in tv.feed(loader):
            images = batch[0] if place == "cpu" else batch[0].images.clone()
            batches.append((images, batch[1:], tv.batch(batch, epoch, len(batches))))
        made[place] = batches
    return made


@pytest.mark.parametrize("workers", [0, 2])
def test_the_decoder_thread_brings_the_workers_pil_batches_bit_for_bit(jpeg_store, workers):
    made = _pipelines(jpeg_store, workers, epoch=1)
    assert len(made["gpu"]) == len(made["cpu"]) == 5
    for (cpu_images, cpu_rest, (cpu_views, cpu_index)), (gpu_images, gpu_rest, (gpu_views, gpu_index)) in zip(
        made["cpu"], made["gpu"], strict=True
    ):
        assert gpu_images.dtype == torch.uint8 and gpu_images.shape == cpu_images.shape == (8, SIZE, SIZE, 3)
        assert torch.equal(gpu_images, cpu_images)  # torchvision's libjpeg-turbo decode is PIL's, bit for bit
        assert all(torch.equal(a, b) for a, b in zip(cpu_rest, gpu_rest, strict=True))  # parameters, labels, index
        assert torch.equal(cpu_index, gpu_index)
        assert all(torch.equal(a, b) for a, b in zip(cpu_views, gpu_views, strict=True))


def test_a_resumed_epoch_continues_with_the_same_batches(jpeg_store):
    whole, resumed = _pipelines(jpeg_store, 0)["gpu"], _pipelines(jpeg_store, 0, start=2)["gpu"]
    for (a, rest_a, _), (b, rest_b, _) in zip(whole[2:], resumed, strict=True):
        assert torch.equal(a, b) and all(torch.equal(x, y) for x, y in zip(rest_a, rest_b, strict=True))


def test_a_feed_stopped_mid_epoch_leaves_the_ring_whole_for_the_next(jpeg_store):
    reader = store.StoreReader(jpeg_store, "train")
    maker = augment.DeviceViews(None, CPU, SIZE, 24, (0.5,) * 3, (0.25,) * 3)
    tv = views.store_views(reader, augment.ViewParams(SIZE, 0.2), 1, 0, maker, local_batch=8, place="gpu")
    loader = make_loader(tv.dataset, epoch_batches(len(reader), 8, 0, 0), 0, CPU, collate_fn=tv.collate)
    feed = tv.feed(loader)
    tv.batch(next(feed), 0, 0)
    next(feed)  # taken, never made into views: a preemption between the two
    feed.close()
    assert tv.device_views.ring._free.qsize() == gpu_decode.SLOTS and not tv.device_views.ring._held
    next_epoch = make_loader(tv.dataset, epoch_batches(40, 8, 0, 1), 0, CPU, collate_fn=tv.collate)
    assert len([tv.batch(batch, 1, step) for step, batch in enumerate(tv.feed(next_epoch))]) == 5


def test_a_damaged_record_stops_the_epoch_with_the_decoders_error(jpeg_store):
    reader = store.StoreReader(jpeg_store, "train")
    maker = augment.DeviceViews(None, CPU, SIZE, 24, (0.5,) * 3, (0.25,) * 3)
    decoder = gpu_decode.StoreDecoder(maker, CPU, 4, SIZE)
    records = [torch.frombuffer(reader.record(i), dtype=torch.uint8) for i in range(4)]
    records[2] = records[2][:40].clone()  # a truncated record
    packed = augment.collate_jpegs([(r, torch.zeros(1), 0, i) for i, r in enumerate(records)])
    with pytest.raises(RuntimeError):
        list(decoder.feed([packed]))
    assert decoder.ring._free.qsize() == gpu_decode.SLOTS


def test_the_store_batches_of_the_cpu_place_are_the_default_collate(jpeg_store):
    reader = store.StoreReader(jpeg_store, "train")
    maker = augment.DeviceViews(None, CPU, SIZE, 24, (0.5,) * 3, (0.25,) * 3)
    tv = views.store_views(reader, augment.ViewParams(SIZE, 0.2), 2, 0, maker, local_batch=8, place="cpu")
    assert tv.collate is default_collate and tv.feed is iter and isinstance(tv.dataset, views.StoreViews)


def test_gpu_decoding_on_a_cpu_is_one_sentence(jpeg_store):
    reader = store.StoreReader(jpeg_store, "train")
    spec = views.ViewSpec("device", SIZE, 24, 0.2, 0, store_decode="gpu")
    with pytest.raises(
        ValueError, match=r"^store_decode: gpu decodes on a CUDA device and this cell runs on cpu; use "
    ):
        views.decode_of(spec, reader, CPU)
    assert views.decode_of(dataclasses.replace(spec, store_decode="auto"), reader, CPU) == "cpu"


def test_a_committed_figure_changes_no_cells_decoder_at_run_time(jpeg_store, tmp_path, monkeypatch):
    """Issue 48: with a figure saying this GPU decodes IR faster, an auto cell (planned with the workers' decode, or
    written by hand) still decodes in the workers on that GPU: its pixels stay the ones it began with.  Before, the job
    read the figure and switched to nvJPEG's pixels under the same config hash."""
    import json

    from ring import resources

    rates = {"store": 3674.0, "store_gpu": 9000.0}
    doc = {"images_per_s": rates, "workers": 8, "store_timed_steps": 48}
    (tmp_path / "throughput_IR_compile-NVIDIA_H200.json").write_text(json.dumps(doc))
    monkeypatch.setattr(resources, "FIGURES", tmp_path)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    reader, gpu = store.StoreReader(jpeg_store, "train"), torch.device("cuda")
    spec = views.ViewSpec("device", SIZE, 24, 0.2, 0, store_decode="auto")
    assert views.decode_of(spec, reader, gpu) == "cpu"
    assert views.decode_of(dataclasses.replace(spec, store_decoder="cpu"), reader, gpu) == "cpu"
    assert views.decode_of(dataclasses.replace(spec, store_decoder="gpu"), reader, gpu) == "gpu"  # planned so


def test_the_plan_refuses_gpu_decoding_where_it_cannot_run():
    """store_decode: gpu needs the jpeg95 store, a CUDA device and the device views: one sentence otherwise."""
    from ring.core.config import PretrainConfig
    from ring.plan import checks

    fix = r"; set store_decode: auto \(the measured choice\) or cpu, or read the jpeg95 store on a GPU\.$"
    cases = {
        "decodes the jpeg95 store on a CUDA device, and this cell does not read that store": [
            dict(store="raw"),
            dict(store="none"),
            dict(resize=288),  # another size than the store's
            dict(dataset="cifar10", resize=32, crop=32),  # in memory
        ],
        "decodes on a CUDA device, and this cell runs on device: cpu": [dict(device="cpu")],
        "hands the device views the decoded batch, and this cell makes its views with augment: cpu": [
            dict(augment="cpu")
        ],
    }
    for problem, overrides in cases.items():
        for override in overrides:
            cfg = PretrainConfig(**{"method": "IR", "dataset": "imagenet", "store_decode": "gpu", **override})
            with pytest.raises(checks.ConfigError, match=rf"^cell: store_decode='gpu' {problem}{fix}"):
                checks.check(cfg, "cell")
    checks.check(PretrainConfig(method="IR", dataset="imagenet", store_decode="gpu"), "cell")
    with pytest.raises(checks.ConfigError, match=r"^cell: store_decode='device' "):
        checks.check(PretrainConfig(method="IR", dataset="imagenet", store_decode="device"), "cell")


def test_the_new_key_leaves_every_existing_cells_hash_alone():
    import dataclasses

    from ring.core.config import PretrainConfig, config_hash

    cfg = PretrainConfig(method="IR", dataset="imagenet")
    assert config_hash(dataclasses.replace(cfg, store_decode="auto")) == config_hash(cfg)
    assert config_hash(dataclasses.replace(cfg, store_decode="gpu")) != config_hash(cfg)  # nvJPEG's pixels
