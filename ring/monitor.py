"""A pretraining cell's kNN monitors on its training network (:class:`KnnMonitor`), at the epochs of its
``knn_schedule`` (:mod:`ring.engine.knn_schedule`).

The monitor embeds every labelled training and test image with the network in eval mode.  From a dataset's prepared
store the images are cropped and normalised on the device (:mod:`ring.data.eval_views`), their records decoded with
the cell's decoder (the GPU's thread where the cell's is, :mod:`ring.data.gpu_decode`); other datasets take today's
PIL views in the loader's workers.  The network is the cell's own, compiled where the cell compiles.
"""

from __future__ import annotations

import torch

from ring.core.config import PretrainConfig
from ring.data import datasets, eval_views
from ring.data.views import ViewSpec, decode_of
from ring.engine import clock
from ring.engine.knn import embed, holdout_accuracy, knn_accuracy, window_same_class
from ring.engine.runtime import epoch_batches, make_loader


class KnnMonitor:
    """A cell's kNN monitors on its training network: accuracies on the test split (logged) and on the validation
    images held out of the training split (the validation-adaptive annealing policy's signal; the test split never
    steers training), and the share of the Ring window's entries of the query's class."""

    def __init__(
        self,
        cfg: PretrainConfig,
        data: datasets.Source,
        net,
        device: torch.device,
        chunk: int,
        views: ViewSpec | None = None,
        compiled: bool = False,
    ):
        """``views``: the cell's view spec, whose decoder decodes a store's records for the monitor too;
        ``compiled``: the monitor's device views compiled as the cell's network is."""
        self.cfg, self.data, self.net, self.device, self.chunk = cfg, data, net, device, chunk
        self.views, self.compiled = views, compiled

    def embed(self, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The split's embeddings: from a store, its records cropped and normalised on the device
        (:mod:`ring.data.eval_views`), else today's PIL views in the loader's workers."""
        cfg, base, norm = self.cfg, self.data.load(split), self.data.normalize()
        batches = epoch_batches(len(base), cfg.batch_size, 0, 0, shuffle=False, drop_last=False)
        place = (lambda reader: decode_of(self.views, reader, self.device)) if self.views else (lambda reader: "cpu")
        device_input = eval_views.for_store(
            base, "none", cfg.resize, cfg.crop, norm, 0, self.device, cfg.batch_size, self.compiled, place
        )
        if device_input is None:
            images = datasets.Views(base, datasets.eval_view(cfg.resize, cfg.crop, norm))
            loader = make_loader(images, batches, cfg.num_workers, self.device)
        else:
            workers = make_loader(device_input.dataset, batches, cfg.num_workers, self.device, device_input.collate)
            loader = device_input.batches(workers)
        return embed(self.net, clock.counted("kNN monitor", loader), self.device)

    def __call__(self, test: bool, validation: bool, window: tuple[float, float] | None = None) -> dict[str, float]:
        """``window``: the Ring window whose classes to measure (the labels measure it, training never sees them)."""
        classes = self.data.spec.num_classes
        with clock.timing("kNN monitor"):
            return self._measure(test, validation, window, classes)

    def _measure(self, test: bool, validation: bool, window, classes: int) -> dict[str, float]:
        cfg = self.cfg
        train_f, train_y = self.embed("train")
        out = {}
        if validation:
            out["val_knn_top1"] = holdout_accuracy(
                train_f, train_y, cfg.ring_val_fraction, classes, cfg.knn_k, cfg.knn_temperature
            )
        if test:
            out.update(knn_accuracy(train_f, train_y, *self.embed("test"), classes, cfg.knn_k, cfg.knn_temperature))
        if window is not None:
            out["window_same_class"] = window_same_class(train_f, train_y, *window, self.chunk)
        return out
