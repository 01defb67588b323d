"""Linear evaluation of a frozen pretrained encoder: the stage's entry point.

    python -m ring.lincls --config CELL/config.yaml --encoder PRETRAIN_CELL/encoder.pt --out CELL

Logistic regression (one linear layer, softmax cross-entropy) on the flattened pre-pool feature
map of the frozen ResNet-18 (512 x 7 x 7 at 224 input), SGD lr 0.01, momentum 0.9, no weight
decay, 100 epochs, no lr drops (paper, Sec. 5).  The encoder runs in eval mode under
``no_grad``: its weights and BatchNorm statistics are never touched.  The reported accuracy is
the test top-1 after the last epoch.  The test top-1 and top-5 of every epoch are logged
(``log.jsonl``, TensorBoard ``lincls/top1``, ``lincls/top5``) to watch the curve; they select
nothing: no epoch is chosen by its test accuracy (that would be model selection on the test
split), the last one is reported whatever the curve does.  A CMC cell's
features are its L and ab encoders' maps concatenated (2 x 512 x 7 x 7), as CMC evaluates; the
protocol stamp says so (:func:`ring.engine.encoder.load_feature_extractor` builds either).

Resume is the default: ``CELL/checkpoint.pt`` (classifier, optimizer, epoch, RNG) is written
atomically after every epoch; the one before it (``checkpoint.prev.pt``) goes once ``metrics.json`` is kept and
verified, the last one too under ``keep_checkpoint: none``.  ``CELL/metrics.json`` stamps the protocol next to
the numbers, and is kept under ``CELL/exported/`` with a checksum record naming this config and the encoder
evaluated.  A cell is one run per config and encoder: a retrained encoder (or an edited config) keeps the previous
run whole under ``CELL/runs/<config hash>-<encoder sha256[:12]>/``, and a kept run of the encoder evaluated now comes
back finished, trained no further (:mod:`ring.core.cell_runs`).

A non-finite loss stops the stage at once (:mod:`ring.engine.health`, exit 1, nothing written).  A test top-1 at
chance (:func:`ring.engine.health.divergence`: within 3 binomial standard errors of 1/K over the test images) is a
diverged evaluation: one sentence on stderr and in ``metrics.json`` under ``diverged``, no ``top1`` or ``top5`` (the
tables print "diverged" with that sentence), exit 0 so that the grid's other tables still build.  A last-epoch mean
training loss above 100 ln K with a top-1 above chance keeps its accuracy: the sentence of
:func:`ring.engine.health.loss_note` (the loss, the protocol) goes to stderr and to ``metrics.json`` under
``loss_note``, and the tables mark the number with it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ring.core import catalog, cell_runs
from ring.core.config import LinclsConfig, TransferConfig, config_hash
from ring.core.files import CHECKSUMS, FileError, atomic_write, check_writable, read_record, remove_stale_temporaries
from ring.core.methods import Method, method
from ring.core.metrics import check_metrics
from ring.core.stages import STAGES
from ring.core.stop import Preempted, stop_requested
from ring.data import datasets, eval_views
from ring.engine import clock, health, provenance
from ring.engine.checkpoint import finish_checkpoints, resume_state, rng_state, save_checkpoint, set_rng_state
from ring.engine.encoder import Precision, load_feature_extractor, resolve_compile, resolve_precision
from ring.engine.logs import JsonLog
from ring.engine.runtime import epoch_batches, make_loader, pick_device, setup_threads
from ring.plan import checks

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.json"
LOG = "log.jsonl"


def keep_foreign_run(out: Path, stage: str, cfg, state: dict) -> None:
    """The encoder was retrained (or the protocol changed) and the cell has no run.json saying so (written by hand,
    or before it was kept): the checkpoint's run evaluated something else.  Kept under runs/, named by what it
    evaluated, as ring.core.cell_runs keeps any other run (keep_superseded decides its checkpoints); the cell evaluates
    from scratch."""
    key = cell_runs.run_key(str(state.get("config_hash")), str(state.get("encoder_sha256") or "unknown"))
    aside = cell_runs.set_aside(out, key, STAGES[stage].run_files)
    print(
        f"ring: {out / CHECKPOINT} belongs to another encoder or protocol; its run is kept in {aside}, starting over",
        file=sys.stderr,
    )
    cell_runs.drop_checkpoints(aside, cfg, log=lambda line: print(line, file=sys.stderr))


def accuracies(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Top-1 and top-5 accuracy in percent (top-k over the classes there are, when fewer than 5)."""
    top5 = logits.topk(min(5, logits.shape[1]), dim=1).indices
    return {
        "top1": 100.0 * (top5[:, 0] == labels).float().mean().item(),
        "top5": 100.0 * (top5 == labels[:, None]).any(dim=1).float().mean().item(),
    }


def feature_shape(extractor, crop: int, device: torch.device) -> tuple[int, ...]:
    """The shape of one image's features (the classifier's input), from a probe image of ``crop`` pixels."""
    with torch.no_grad():
        return tuple(extractor(torch.zeros(1, 3, crop, crop, device=device)).shape[1:])


def kept_metrics(out: Path, stage: str, cfg, encoder_sha256: str) -> dict | None:
    """The metrics of this very evaluation when it is complete (an undone edit brought it back, its kept outputs
    verified): its numbers, not new ones; None when it is to run."""
    if not cell_runs.finished(out, stage, cfg, encoder_sha256):
        return None
    print(
        f"ring: {out}: this encoder's evaluation is complete (kept outputs verified); nothing to train", file=sys.stderr
    )
    return json.loads((out / METRICS).read_text())


def progress_bar(epochs: int, initial: int) -> tqdm:
    """The run's progress bar over its epochs on stderr (none where stderr is no terminal: ``disable=None``)."""
    return tqdm(total=epochs, initial=initial, desc="linear eval", file=sys.stderr, disable=None, dynamic_ncols=True)


class Resolved(NamedTuple):
    """An evaluation cell resolved once (:meth:`LinearEval.resolve`) and handed down: the method whose encoder it
    evaluates (None for a config that names none) and the dataset it evaluates on, each looked up by name there."""

    method: Method | None
    data: datasets.Source  # a transfer cell's: ring.data.metadataset.Source


def resolve(cfg: LinclsConfig) -> Resolved:
    """The cell's method (the registry) and dataset (the catalog), looked up here and nowhere below; an unknown
    method or dataset, the plan's checks and missing files fail here, before any data is read."""
    entry = catalog.spec(cfg.dataset)
    checks.check(cfg, where(cfg))  # the plan's checks (ring.plan.checks), before any data
    data = datasets.source(entry, cfg.data_root, cfg.store, cfg.resize)
    data.check()
    return Resolved(resolve_method(cfg), data)


def resolve_method(cfg: LinclsConfig) -> Method | None:
    """The method whose encoder ``cfg`` evaluates; a config written by hand may name none (one trunk, then)."""
    return method(cfg.method) if cfg.method else None


def where(cfg: LinclsConfig) -> str:
    return f"{type(cfg).__name__} cell {cfg.dataset}/{cfg.method}/seed{cfg.seed}"


class LinearEval:
    STAGE = "lincls"  # what ring.core.cell_runs keeps aside when this cell's config changes
    PASS = "linear evaluation"  # its seconds' name in provenance.json (ring.engine.clock)
    RESOLVE = staticmethod(resolve)  # its entry point's lookups (ring.transfer: a transfer dataset's)

    def __init__(self, cfg: LinclsConfig, encoder_path: str | Path, out_dir: str | Path, cell: Resolved | None = None):
        """``cell``: what :data:`RESOLVE` made of ``cfg`` (:func:`run` resolves it first); resolved here if not."""
        self.cfg = cfg
        self.out = Path(out_dir)
        self.encoder_path = Path(encoder_path)
        self.cell = cell or self.RESOLVE(cfg)
        self.spec = self.cell.data.spec
        setup_threads(cfg.threads)
        self.device = pick_device(cfg.device)
        torch.manual_seed(cfg.seed)

        train, test, norm = self.splits()
        # The frozen extractor of the pretraining cell (one trunk, or CMC's L and ab trunks, which
        # undo this very normalisation before converting to Lab).
        names = self.cell.method.encoder_files if self.cell.method else (self.encoder_path.name,)
        self.trunk = load_feature_extractor(self.encoder_path, names, norm.mean, norm.std)
        self.bf16, self.channels_last = resolve_precision(cfg.precision, cfg.channels_last, self.device)
        compiled = resolve_compile("auto", self.device)  # pretraining's compile: auto (CUDA): forward and store views
        self.extractor = Precision(self.trunk.to(self.device), self.bf16, self.channels_last, compiled).eval()
        self.encoder_hashes = self.trunk.sha256  # each file verified against its cell's checksum record
        # The pretraining config the encoder was made with (its checksum record's), for the tables' chain check.
        self.encoder_config_hash = read_record(self.encoder_path.with_name(CHECKSUMS)).get("config_hash")
        # One fingerprint of every encoder file: a retrained cell invalidates the checkpoint, and names the run.
        self.encoder_sha256 = cell_runs.encoder_fingerprint(self.encoder_hashes)

        self.feature_shape = feature_shape(self.extractor, cfg.crop, self.device)
        n_features = int(torch.tensor(self.feature_shape).prod())
        self.classifier = nn.Linear(n_features, self.spec.num_classes).to(self.device)
        self.optimizer = torch.optim.SGD(
            self.classifier.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
        self.train_set = eval_input(train, cfg.augmentation, cfg, norm, cfg.seed, self.device, compiled)
        self.test_set = eval_input(test, "none", cfg, norm, 0, self.device, compiled)
        self.epoch = 0
        self.log = JsonLog(self.out / LOG)
        self._cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def splits(self):
        """The labelled (train, test) images and the input normalisation; ring.transfer evaluates another dataset."""
        data = self.cell.data
        return data.load("train"), data.load("test"), data.normalize()

    # -- features ----------------------------------------------------------------------------
    @torch.no_grad()
    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.extractor(x.to(self.device, non_blocking=True)), 1)

    def _cached(self, name: str, dataset) -> tuple[torch.Tensor, torch.Tensor]:
        if name not in self._cache:
            self._cache[name] = all_features(
                self.features, dataset, self.cfg.batch_size, self.cfg.num_workers, self.device, self.PASS
            )
        return self._cache[name]

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self) -> None:
        with clock.timing("checkpoint writes"):
            self._save_checkpoint()

    def _save_checkpoint(self) -> None:
        save_checkpoint(
            {
                "config_hash": config_hash(self.cfg),
                "encoder_sha256": self.encoder_sha256,
                "epoch": self.epoch,
                "classifier": self.classifier.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "rng": rng_state(),
            },
            self.out / CHECKPOINT,
        )

    def resume(self) -> None:
        # The latest checkpoint that verifies, else the previous one (saying so), else a fresh start; one of another
        # config or encoder is kept out of the way with its run (keep_foreign_run) and the cell starts over.
        state = resume_state(
            self.out / CHECKPOINT,
            "linear-evaluation checkpoint",
            lambda state: (
                state.get("config_hash") == config_hash(self.cfg) and state.get("encoder_sha256") == self.encoder_sha256
            ),
            lambda state: keep_foreign_run(self.out, self.STAGE, self.cfg, state),
        )
        if state is None:
            return
        self.classifier.load_state_dict(state["classifier"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_rng_state(state["rng"])
        self.epoch = int(state["epoch"])

    # -- training ----------------------------------------------------------------------------
    def _train_epoch(self) -> float:
        cfg = self.cfg
        self.train_set.set_epoch(self.epoch)
        batches = epoch_batches(len(self.train_set), cfg.batch_size, cfg.seed, self.epoch, drop_last=False)
        if cfg.augmentation == "none":
            feats, labels = self._cached("train", self.train_set)
            pairs = ((feats[b], labels[b]) for b in map(torch.tensor, batches))
        else:
            loader = clock.counted(self.PASS, loader_of(self.train_set, batches, cfg.num_workers, self.device))
            pairs = ((self.features(x), y.to(self.device)) for x, y, _ in loader)
        total, count = 0.0, 0
        for step, (f, y) in enumerate(pairs, 1):
            loss = F.cross_entropy(self.classifier(f), y)
            # Before the step: a diverged loss never reaches the classifier or a checkpoint.
            health.check_loss(loss.item(), str(self.out), self.epoch + 1, step, cfg.lr, self.out / CHECKPOINT)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            total += loss.item() * len(y)
            count += len(y)
        health.check_parameters(
            self.classifier.state_dict(), str(self.out), self.epoch + 1, cfg.lr, self.out / CHECKPOINT
        )
        return total / count

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        feats, labels = self._cached("test", self.test_set)
        return accuracies(torch.cat([self.classifier(f) for f in feats.split(self.cfg.batch_size)]), labels)

    def protocol(self) -> dict:
        cfg = self.cfg
        return {
            "feature_layer": self.trunk.description,
            "feature_shape": list(self.feature_shape),
            "input_size": cfg.crop,
            "resize": cfg.resize,
            "classifier": "linear (logistic regression)",
            "epochs": cfg.epochs,
            "batch_size": cfg.batch_size,
            "optimizer": "SGD",
            "lr": cfg.lr,
            "momentum": cfg.momentum,
            "weight_decay": cfg.weight_decay,
            "lr_schedule": "constant",
            "augmentation": cfg.augmentation,
            "encoder": str(self.encoder_path),
            "encoder_sha256": self.encoder_sha256,
            "encoder_files": self.encoder_hashes,
            "selection": "last epoch",
            "precision": "bf16" if self.bf16 else "fp32",
        }

    def run(self) -> dict:
        check_writable(self.out)  # an unwritable cell folder fails now, not after an epoch
        if stale := remove_stale_temporaries(self.out):
            print(f"ring: {self.out}: removed {len(stale)} temporary file(s) left by killed writes", file=sys.stderr)
        cell_runs.prepare(
            self.out, self.STAGE, self.cfg, log=lambda line: print(line, file=sys.stderr), encoder=self.encoder_sha256
        )
        if (kept := kept_metrics(self.out, self.STAGE, self.cfg, self.encoder_sha256)) is not None:
            return kept
        self.resume()
        cell_runs.write_record(self.out, self.cfg, self.encoder_sha256)
        self.write_inputs()
        self.log.truncate_from(self.epoch)
        with self.log, provenance.Segment(self.out, config_hash(self.cfg), self.cfg.seed):
            return self._run()

    def write_inputs(self) -> None:
        """Files that describe what this run reads, written once the cell's folder is this run's (ring.transfer)."""

    def _run(self) -> dict:
        with progress_bar(self.cfg.epochs, self.epoch) as progress, clock.timing(self.PASS):
            scores, loss = None, None
            while self.epoch < self.cfg.epochs:
                loss = self._train_epoch()
                # The test features are cached on the first call, so this costs one linear layer per
                # epoch; it draws no random numbers, so a resumed run trains bit-identically.
                scores = self.evaluate()
                # The log before the checkpoint: a kill between the two redoes (and rewrites) this
                # epoch on resume, never leaves a checkpointed epoch without its line.
                self.log.append({"epoch": self.epoch, "loss": loss, **scores})
                self.epoch += 1
                self.save_checkpoint()
                progress.update(1)
                progress.set_postfix(loss=f"{loss:.4f}", top1=f"{scores['top1']:.2f}")
                if stop_requested():  # the epoch's checkpoint is written: stop for the requeue
                    raise Preempted(f"{self.out}: checkpointed after epoch {self.epoch}")
        return write_metrics(self, scores, loss)


def eval_input(base, augmentation: str, cfg: LinclsConfig, norm, seed: int, device: torch.device, compiled: bool):
    """A split's views: from a prepared store, made on the device (:mod:`ring.data.eval_views`: the records read,
    decoded as the store's workers decode them, in the loader's workers), else today's PIL views.  On a CPU a random
    crop's per-sample matmuls run on the cores the workers need: measured 3.4x slower than their PIL crops
    (``eval_input-cpu.json``), so a CPU keeps today's views for them, as ``augment: auto`` keeps pretraining's."""
    if augmentation == "none" or device.type == "cuda":
        made = eval_views.for_store(
            base, augmentation, cfg.resize, cfg.crop, norm, seed, device, cfg.batch_size, compiled
        )
        if made is not None:
            return made
    return datasets.Views(base, datasets.linear_view(cfg.resize, cfg.crop, augmentation, norm), seed=seed)


def loader_of(dataset, batches: list[list[int]], num_workers: int, device: torch.device):
    """``(x, y, index)`` batches of ``dataset`` (:func:`eval_input`'s) in the order ``batches``: a store's views on the
    device, today's from the loader's workers."""
    if isinstance(dataset, eval_views.EvalInput):
        return dataset.batches(make_loader(dataset.dataset, batches, num_workers, device, dataset.collate))
    return make_loader(dataset, batches, num_workers, device)


@torch.no_grad()
def all_features(
    features, dataset, batch_size: int, num_workers: int, device: torch.device, name: str = "linear evaluation"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every image of ``dataset`` through ``features``, in order, and its label, on ``device`` (each batch counted
    as pass ``name``'s: ring.engine.clock)."""
    batches = epoch_batches(len(dataset), batch_size, 0, 0, shuffle=False, drop_last=False)
    feats, labels = [], []
    for x, y, _ in clock.counted(name, loader_of(dataset, batches, num_workers, device)):
        feats.append(features(x))
        labels.append(y.to(device))
    return torch.cat(feats), torch.cat(labels)


def protocol_text(cfg: LinclsConfig, trunk_description: str) -> str:
    """How the probe was trained, in the words of a table's footnote."""
    return (
        f"the linear protocol (SGD lr={cfg.lr:g}, momentum {cfg.momentum:g}, "
        f"weight decay {cfg.weight_decay:g}, batch {cfg.batch_size}, {cfg.epochs} epochs, constant lr, "
        f"on {trunk_description})"
    )


def logged_loss(out: Path, epoch: int) -> float | None:
    """The training loss ``out/log.jsonl`` holds for ``epoch`` (a finished checkpoint found again), None if absent."""
    path = out / LOG
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return next((float(r["loss"]) for r in reversed(records) if r.get("epoch") == epoch and "loss" in r), None)


def write_metrics(run: LinearEval, scores: dict | None, loss: float | None) -> dict:
    """The finished cell's metrics.json, written atomically and kept beside its checksum record; its contents."""
    # What the number was made from: this cell's config and the encoder (its files and its own config),
    # which ring.reports.tables checks against the cells as they are now before the number reaches a table.
    metrics = {
        "dataset": run.cfg.dataset,
        "method": run.cfg.method,
        "seed": run.cfg.seed,
        "config_hash": config_hash(run.cfg),
        "encoder_config_hash": run.encoder_config_hash,
        "protocol": run.protocol(),
    }
    # A non-finite loss or a test top-1 at chance (health.divergence): the sentence instead of an accuracy, which
    # the tables print as "diverged" (the workflow goes on; the cell is finished, with that verdict).  A high
    # loss with an accuracy above chance keeps its accuracy and a note (health.loss_note), which the tables mark.
    # The last epoch's accuracy, the very numbers of its log line (a finished checkpoint, found again, is
    # evaluated anew on the same features).
    scores = scores or run.evaluate()
    last_loss = loss if loss is not None else logged_loss(run.out, run.epoch - 1)
    verdict = health.probe_verdict(
        scores,
        last_loss,
        run.spec.num_classes,
        len(run.test_set),
        str(run.out),
        run.epoch,
        run.cfg.lr,
        protocol_text(run.cfg, run.trunk.description),
    )
    for key in ("diverged", "loss_note"):
        if key in verdict:
            print(f"ring: {verdict[key]}", file=sys.stderr)
    metrics.update(verdict)
    if "top1" in metrics:
        check_metrics(metrics, run.out / METRICS, keys=("top1", "top5"))
    atomic_write(run.out / METRICS, lambda fh: fh.write((json.dumps(metrics, indent=2) + "\n").encode()))
    # Kept beside a checksum record, where Snakemake's cleanup does not look: collected without a job, and
    # kept with this run when the encoder or config changes (ring.core.cell_runs).
    cell_runs.keep_outputs(run.out, run.STAGE, run.cfg, run.encoder_sha256)
    # Kept and verified, the outputs stand for the run: the previous checkpoint goes, the last too under
    # keep_checkpoint: none (ring.engine.checkpoint.finish_checkpoints); unverified copies keep both.
    if cell_runs.verified_copies(run.out):
        finish_checkpoints(run.out / CHECKPOINT, run.cfg.keep_checkpoint)
    return metrics


def run(cfg: LinclsConfig, encoder_path: str | Path, out_dir: str | Path, evaluation=None) -> dict:
    clock.start()  # what each pass of this cell costs (ring.engine.clock), recorded with its segment
    evaluation = evaluation or LinearEval
    with clock.timing("setup"):  # the checks, the data's folders, the encoder's files
        cell = evaluation(cfg, encoder_path, out_dir, evaluation.RESOLVE(cfg))
    return cell.run()


def main(argv=None, evaluation=LinearEval, config_cls=LinclsConfig, description: str | None = None) -> int:
    """The entry point; ``evaluation`` and ``config_cls`` let ring.transfer share it."""
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    parser.add_argument(
        "--config", required=True, help=f"cell config (YAML of {config_cls.__name__} fields; {checks.REFERENCE_HINT})"
    )
    parser.add_argument("--encoder", required=True, help="encoder.pt written by ring.pretrain")
    parser.add_argument("--out", required=True, help="cell folder: checkpoint, log and metrics.json go here")
    args = parser.parse_args(argv)
    clock.entered()  # the interpreter's start and the imports: this job's first fixed cost
    try:
        stage = {LinclsConfig: "lincls", TransferConfig: "transfer"}[config_cls]
        metrics = run(checks.load_checked(stage, args.config), args.encoder, args.out, evaluation)
    except (ValueError, FileNotFoundError, FileError) as err:
        print(f"ring: {err}", file=sys.stderr)
        return 1
    if "diverged" not in metrics:  # a diverged evaluation said so already, and wrote no accuracy
        print(f"ring: {args.out}: top1={metrics['top1']:.2f} top5={metrics['top5']:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
