"""The prepared store's jpeg95 records decoded on the GPU (``store_decode: gpu``), beside the training step.

The loader's workers read each record's bytes (:class:`ring.data.views.StoreViews` with ``decoded=False``) and hand
the batch over packed (:func:`ring.data.augment.collate_jpegs`).  A decoder thread takes the batches in the loader's
order, decodes each with ``torchvision.io.decode_jpeg(device="cuda")`` (nvJPEG; the hardware engine of A100, H100 and
H200 for baseline JPEGs) on a CUDA stream of its own, and writes it into one of a few preallocated uint8 B x 3 x H x W
device buffers (:class:`SlotRing`); the training loop takes them in the same order, makes the views from the buffer
(:class:`ring.data.augment.DeviceViews`) and releases it.  The views' parameters come from the workers exactly as
with the workers' decode, and the loader's batches are the same, so resume and determinism are unchanged; the
pixels are nvJPEG's, which may differ from libjpeg-turbo's (PIL's) by its IDCT's rounding (measured on a GPU only).

Why every wait is where it is.  Two faults of the CUDA decoder (pytorch/vision PR 9606, meta-pytorch/torchcodec
PR 1634; the device-side assert this project met in ``augment.decode_jpegs``): torchvision allocates the decoded
images on the caller's current stream and decodes on a private one without waiting for it, so the caching allocator
may hand it a block that kernels queued on the caller's stream still read; and nvJPEG's hardware engine writes its
output when it is called, whatever is queued before it on its stream -- a device-side wait (an event waited on by a
stream) does not hold it back, only a host wait does.  So:

* the decoder thread decodes with its own stream current, on which only the decoder's own work runs, and waits on
  the host for that work (the decode and the copy into the buffer) before it publishes the buffer: at every decode
  nothing is queued on the stream whose blocks the allocator hands out;
* a buffer is written again only after the host has waited for the event the training stream recorded after its
  last use (the views' kernels reading it), so neither a kernel nor the hardware engine can overwrite a batch that
  is still being read;
* the training stream waits on the event the decoder recorded after writing the buffer (a device-side wait: never a
  synchronisation of the training stream).

:class:`SlotRing` holds that handover and nothing else; its streams and events are the device's (:class:`CudaSync`),
the host's (:class:`HostSync`: work on the CPU is done when its call returns), or the tests' fakes.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch

from ring.data import augment
from ring.data.store_layout import StoreError

SLOTS = 3  # one batch in the views, one decoded ahead, one being decoded: the decoder never waits on a full ring


class HostSync:
    """Streams and events of the CPU: a call's work is done when it returns, so every event has fired."""

    class Event:
        def record(self, stream=None) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def query(self) -> bool:
            return True

    def stream(self):
        return None

    def current(self):
        return None

    def event(self) -> HostSync.Event:
        return HostSync.Event()

    def wait(self, stream, event) -> None:
        pass

    def use(self, stream):
        return contextlib.nullcontext()


class CudaSync:
    """Streams and events of one CUDA device."""

    def __init__(self, device: torch.device):
        self.device = device

    def stream(self):
        return torch.cuda.Stream(self.device)

    def current(self):
        return torch.cuda.current_stream(self.device)

    def event(self):
        return torch.cuda.Event(blocking=True)  # a host wait sleeps instead of spinning on a core the workers need

    def wait(self, stream, event) -> None:
        stream.wait_event(event)

    def use(self, stream):
        return torch.cuda.stream(stream)


def sync_for(device: torch.device):
    return CudaSync(device) if device.type == "cuda" else HostSync()


class _Published(NamedTuple):
    slot: int | None  # None: the end (payload None) or the producer's error (payload the exception)
    ready: object
    payload: object


class SlotRing:
    """``n`` buffers handed from one producer thread to one consumer, in the order they were published.

    Producer: :meth:`claim` a free slot (waiting on the host for the consumer's release event of it), write the
    buffer on ``producer_stream``, :meth:`publish` it.  Consumer: :meth:`take` the next one (its stream waits on the
    producer's event), read it, :meth:`release` it (an event recorded on the consumer's stream).  :meth:`reset` after
    a feed ends, at any point, leaves every slot free with its last reader's event.
    """

    def __init__(self, n: int, sync, producer_stream):
        self.n, self.sync, self.producer_stream = n, sync, producer_stream
        self._free: queue.Queue = queue.Queue()
        for slot in range(n):
            self._free.put((slot, None))
        self._full: queue.Queue = queue.Queue()
        self._claimed: set[int] = set()  # by the producer, not yet published
        self._held: set[int] = set()  # by the consumer, not yet released

    # -- the producer ----------------------------------------------------------------------------------------------
    def claim(self, stop: threading.Event) -> int | None:
        """The next free slot once its last reader's work has run (None: ``stop`` was set while waiting)."""
        while not stop.is_set():
            try:
                slot, released = self._free.get(timeout=0.05)
            except queue.Empty:
                continue
            if released is not None:
                released.synchronize()  # a host wait: the hardware decoder does not respect a stream's order
            self._claimed.add(slot)
            return slot
        return None

    def publish(self, slot: int, payload) -> None:
        """Hands ``slot`` over once the producer's work on it has run (a host wait, then the event the consumer's
        stream waits on)."""
        ready = self.sync.event()
        ready.record(self.producer_stream)
        ready.synchronize()
        self._claimed.remove(slot)
        self._full.put(_Published(slot, ready, payload))

    def finish(self, error: BaseException | None = None) -> None:
        self._full.put(_Published(None, None, error))

    # -- the consumer ----------------------------------------------------------------------------------------------
    def take(self) -> tuple[int, object] | None:
        """The next published ``(slot, payload)``, or None at the end; the producer's error is raised here."""
        item = self._full.get()
        if item.slot is None:
            if item.payload is not None:
                raise item.payload
            return None
        self.sync.wait(self.sync.current(), item.ready)
        self._held.add(item.slot)
        return item.slot, item.payload

    def release(self, slot: int) -> None:
        """The consumer has queued its last use of ``slot``: it may be written once the work queued so far has run."""
        self._held.remove(slot)
        done = self.sync.event()
        done.record(self.sync.current())
        self._free.put((slot, done))

    def reset(self) -> None:
        """After the producer has stopped: slots it claimed, published slots nobody took and slots still held by the
        consumer become free, each once the work queued on it has run."""
        for slot in sorted(self._claimed):
            written = self.sync.event()
            written.record(self.producer_stream)
            self._free.put((slot, written))
        self._claimed.clear()
        while True:
            try:
                item = self._full.get_nowait()
            except queue.Empty:
                break
            if item.slot is not None:
                self._free.put((item.slot, item.ready))
        for slot in sorted(self._held):
            self.release(slot)


class Handed(NamedTuple):
    """A decoded batch in a ring buffer: ``images`` uint8 B x H x W x 3 (a view of the B x 3 x H x W buffer)."""

    slot: int
    images: torch.Tensor


class StoreDecoder:
    """The device views of a jpeg95 store decoded on ``device`` (``store_decode: gpu``; on a CPU the same pipeline
    with torchvision's CPU decoder, which the tests hold to the workers' PIL decode bit for bit).

    ``feed(loader)`` runs the decoder thread over one epoch's loader and yields its batches with the images in a ring
    buffer; calling the object with a yielded batch's parameters, indices and buffer makes the views and releases it.
    """

    def __init__(self, views: augment.DeviceViews, device: torch.device, batch: int, size: int, slots: int = SLOTS):
        self.views, self.device, self.size = views, torch.device(device), size
        self.sync = sync_for(self.device)
        self.stream = self.sync.stream()
        self.buffers = [torch.empty(batch, 3, size, size, dtype=torch.uint8, device=self.device) for _ in range(slots)]
        self.ring = SlotRing(slots, self.sync, self.stream)
        self.cpu_fallback_batches = 0  # batches nvJPEG refused, decoded by torchvision's CPU decoder instead

    def decode(self, packed: tuple[torch.Tensor, torch.Tensor], slot: int) -> torch.Tensor:
        """A batch's records (``collate_jpegs``' packing) decoded into buffer ``slot``, on the decoder's stream."""
        from torchvision.io import ImageReadMode, decode_jpeg

        records = augment.unpack_jpegs(packed)
        with self.sync.use(self.stream):
            try:
                images = decode_jpeg(records, mode=ImageReadMode.RGB, device=self.device)
            except RuntimeError:
                if self.device.type != "cuda":
                    raise
                self.cpu_fallback_batches += 1  # a record nvJPEG refuses: this batch on the CPU, then one copy
                images = [image.to(self.device) for image in decode_jpeg(records, mode=ImageReadMode.RGB)]
            if any(tuple(image.shape) != (3, self.size, self.size) for image in images):
                shapes = sorted({tuple(image.shape) for image in images})
                raise StoreError(
                    f"The store's records decode to {shapes}, not (3, {self.size}, {self.size}); delete the store and "
                    "prepare it again."
                )
            out = self.buffers[slot][: len(images)]
            torch.stack(images, out=out)
        return out

    def _produce(self, batches: Iterable, stop: threading.Event) -> None:
        try:
            for packed, *rest in batches:
                slot = self.ring.claim(stop)
                if slot is None:
                    return
                self.decode(packed, slot)
                self.ring.publish(slot, rest)
            self.ring.finish()
        except BaseException as err:  # noqa: BLE001 (handed to the training loop, which raises it)
            self.ring.finish(err)

    def feed(self, loader: Iterable) -> Iterator[tuple]:
        """``loader``'s batches in its order, each ``(Handed, *params, labels, index)``."""
        stop = threading.Event()
        # A new thread starts on CUDA device 0: it takes the training thread's device ("cuda" names no index).
        index = None
        if self.device.type == "cuda":
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()

        def run() -> None:
            if index is not None:
                torch.cuda.set_device(index)
            self._produce(loader, stop)

        thread = threading.Thread(target=run, name="ring-store-decoder", daemon=True)
        thread.start()
        try:
            while (taken := self.ring.take()) is not None:
                slot, rest = taken
                yield (Handed(slot, self.buffers[slot][: len(rest[-1])].permute(0, 2, 3, 1)), *rest)
        finally:
            stop.set()
            thread.join()
            self.ring.reset()

    def __call__(self, params: list[torch.Tensor], index: torch.Tensor, data: Handed) -> list[torch.Tensor]:
        views = self.views(params, index, data.images)
        self.ring.release(data.slot)  # the views' kernels are queued: the buffer may be refilled once they have run
        return views
