"""Transfer: linear evaluation of a frozen, source-pretrained encoder on another dataset (Table 3).

    python -m ring.transfer --config CELL/config.yaml --encoder PRETRAIN_CELL/encoder.pt --out CELL

The protocol is linear evaluation's (:class:`ring.lincls.LinearEval`: frozen trunk, features,
logistic regression, resume, metrics stamp); only the data differs.  The dataset is a transfer
dataset of :mod:`ring.data.metadataset`, in its documented split, and

* its split manifest (every file and label, and their SHA-256) is written to
  ``CELL/split-manifest.json`` and its checksum stamped into ``metrics.json``;
* its input normalisation is its own training split's per-channel mean and std, over the images as
  the encoder sees them before normalising (resized to ``resize`` x ``resize``, centre-cropped to
  ``crop``, in [0, 1]).  They are computed once per dataset and cached in
  ``<stats_cache>/normalization-<resize>x<crop>.json`` with the manifest's checksum: a changed
  split recomputes them.  Two cells computing them at once write the same file atomically.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader
from torchvision import transforms as T

from ring import lincls
from ring.core import catalog
from ring.core.config import TransferConfig
from ring.core.files import atomic_write
from ring.data import datasets, metadataset
from ring.lincls import LinearEval
from ring.plan import checks

MANIFEST = "split-manifest.json"


def write_json(doc: dict, path: Path) -> None:
    # A private temporary file per writer (cells may race on a shared cache); a full disk or an
    # unwritable folder is one sentence (ring.core.files.FileError).
    atomic_write(path, lambda fh: fh.write((json.dumps(doc, indent=1) + "\n").encode()))


@torch.no_grad()
def channel_stats(images, resize: int, crop: int, num_workers: int = 0, batch_size: int = 256) -> dict:
    """Per-channel mean and (population) std of ``images`` resized, centre-cropped, in [0, 1]."""
    view = T.Compose([T.Resize((resize, resize)), T.CenterCrop(crop), T.ToTensor()])
    loader = DataLoader(datasets.Views(images, view), batch_size=batch_size, num_workers=num_workers)
    total = torch.zeros(3, dtype=torch.float64)
    squares = torch.zeros(3, dtype=torch.float64)
    pixels = 0
    for x, _, _ in loader:
        x = x.double()
        total += x.sum(dim=(0, 2, 3))
        squares += x.square().sum(dim=(0, 2, 3))
        pixels += x.numel() // 3
    mean = total / pixels
    std = (squares / pixels - mean.square()).clamp_min(0).sqrt()
    return {"mean": [round(v, 6) for v in mean.tolist()], "std": [round(v, 6) for v in std.tolist()]}


def normalization(images, split_sha256: str, resize: int, crop: int, cache_dir: Path, num_workers: int = 0) -> dict:
    """The training split's statistics, from the cache when it holds them for this very split."""
    path = Path(cache_dir) / f"normalization-{resize}x{crop}.json"
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):  # not JSON (never unpickled): recompute below
            print(f"ring: the normalisation cache {path} is not valid JSON; recomputing it", file=sys.stderr)
            cached = {}
        if not isinstance(cached, dict):
            cached = {}
        if cached.get("split_sha256") == split_sha256:
            return cached
    doc = {
        "split_sha256": split_sha256,
        "resize": resize,
        "crop": crop,
        "images": len(images),
        **channel_stats(images, resize, crop, num_workers),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(doc, path)
    return doc


def resolve(cfg: TransferConfig) -> lincls.Resolved:
    """The cell's method (the registry), its transfer dataset and its source (the catalog), looked up here and
    nowhere below; the plan's checks and the dataset's folder and listing fail here, before any image is read."""
    entry = catalog.TRANSFER.get(cfg.dataset)
    if entry is None:
        raise ValueError(f"{cfg.dataset!r} is not a transfer dataset; choose one of {', '.join(catalog.TRANSFER)}.")
    if cfg.source not in catalog.DATASETS:
        raise ValueError(
            f"Transfer source {cfg.source!r} is not a pretraining dataset; choose one of {', '.join(catalog.DATASETS)}."
        )
    checks.check(cfg, lincls.where(cfg))  # the plan's transfer checks (ring.plan.checks), before any data
    return lincls.Resolved(lincls.resolve_method(cfg), metadataset.source(entry, cfg.data_root))


class TransferEval(LinearEval):
    STAGE = "transfer"
    PASS = "transfer"
    RESOLVE = staticmethod(resolve)

    def splits(self):
        cfg, data = self.cfg, self.cell.data
        self.manifest = data.manifest
        train, test = data.load("train"), data.load("test")
        self.stats = normalization(
            train, self.manifest["sha256"], cfg.resize, cfg.crop, Path(cfg.stats_cache or self.out), cfg.num_workers
        )
        return train, test, T.Normalize(self.stats["mean"], self.stats["std"])

    def protocol(self) -> dict:
        return {
            **super().protocol(),
            "source": self.cfg.source,
            "split": self.manifest["split"],
            "split_counts": self.manifest["counts"],
            "matches_publisher_counts": self.manifest["matches_publisher"],
            "split_manifest": MANIFEST,
            "split_sha256": self.manifest["sha256"],
            "normalization": {
                "mean": self.stats["mean"],
                "std": self.stats["std"],
                "from": f"{self.stats['images']} training images",
            },
        }

    def write_inputs(self) -> None:
        write_json(self.manifest, self.out / MANIFEST)  # after ring.core.cell_runs set aside the previous run's


def run(cfg: TransferConfig, encoder_path: str | Path, out_dir: str | Path) -> dict:
    return lincls.run(cfg, encoder_path, out_dir, TransferEval)


def main(argv=None) -> int:
    return lincls.main(argv, TransferEval, TransferConfig, __doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
