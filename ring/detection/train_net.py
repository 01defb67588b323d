"""Detectron2's trainer as Table 4 uses it, and Detectron2's command line to rerun a cell by hand.

    python -m ring.detection.train_net --config-file CELL/detectron2.yaml [--num-gpus N] [--resume] [--eval-only] [KEY
    VALUE ...]
    DETECTRON2_DATASETS=/datasets python -m ring.detection.train_net --config-file ...

This is Detectron2's ``tools/train_net.py`` (its argument parser, ``default_setup`` and
``launch``) with the three things Table 4 needs: the BasicBlock res5 head registered
(:mod:`ring.detection.heads`), COCO evaluation through pycocotools (``use_fast_impl=False``,
which needs no C++ extension) next to Pascal VOC's, and training logs without TensorBoard.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from detectron2.checkpoint import DetectionCheckpointer
from detectron2.data import MetadataCatalog
from detectron2.engine import DefaultTrainer, HookBase
from detectron2.evaluation import COCOEvaluator, PascalVOCDetectionEvaluator
from detectron2.utils.events import CommonMetricPrinter, JSONWriter, TensorboardXWriter

import ring.detection.heads  # noqa: F401  (registers BasicRes5ROIHeads)
from ring.core.files import atomic_write, remove_stale_temporaries
from ring.core.metrics import NonFinite
from ring.core.stop import Preempted, stop_requested
from ring.detection import configs
from ring.detection.convert import AUTHOR, read_converted
from ring.engine import health
from ring.engine.checkpoint import safe_load

TRAIN_LOG = "log.jsonl"


class StopOnRequest(HookBase):
    """On SLURM's preemption signal (ring.core.stop.request_stop): checkpoint at the step boundary, stop.

    Detectron2's checkpointer records the file in ``last_checkpoint`` only after writing it, so a
    job killed mid-write resumes from the previous checkpoint.
    """

    def after_step(self):
        if stop_requested():
            iteration = self.trainer.iter
            self.trainer.checkpointer.save(f"model_{iteration:07d}", iteration=iteration)
            raise Preempted(f"{self.trainer.cfg.OUTPUT_DIR}: checkpointed after iteration {iteration + 1}")


def setup(cfg, args=None) -> None:
    """What both entry points (the workflow's ``ring.detection`` and this command line) do before
    building a trainer: Detectron2's loggers, and torch, NumPy and Python's RNGs seeded from
    ``cfg.SEED`` (+ rank), so one seed gives one head initialisation, data order and result.

    This is Detectron2's ``default_setup`` less its copy of the config to ``OUTPUT_DIR/config.yaml``:
    in a cell folder that name is the cell's own config, and the Detectron2 config is already there
    as ``detectron2.yaml``.
    """
    import torch
    from detectron2.utils import comm
    from detectron2.utils.env import seed_all_rng
    from detectron2.utils.logger import setup_logger

    rank = comm.get_rank()
    setup_logger(cfg.OUTPUT_DIR, distributed_rank=rank, name="fvcore")
    logger = setup_logger(cfg.OUTPUT_DIR, distributed_rank=rank, name="detectron2")
    logger.info(f"Rank {rank} of {comm.get_world_size()}, seed {cfg.SEED}; command line arguments: {args}")
    if rank == 0 and os.path.isdir(cfg.OUTPUT_DIR) and (stale := remove_stale_temporaries(cfg.OUTPUT_DIR)):
        # No write of this cell is under way yet: these are what SIGKILLs during checkpoint writes left.
        logger.info(f"Removed {len(stale)} temporary file(s) left by killed checkpoint writes: {', '.join(stale)}")
    seed_all_rng(None if cfg.SEED < 0 else cfg.SEED + rank)
    if not getattr(args, "eval_only", False):
        torch.backends.cudnn.benchmark = cfg.CUDNN_BENCHMARK


class SafeCheckpointer(DetectionCheckpointer):
    """Detectron2's checkpointer that never unpickles a file, never writes a non-finite model, and
    never leaves a half-written checkpoint under a real name.

    Converted ``.pkl`` weights go through :func:`ring.detection.convert.read_converted` (a restricted
    unpickler admitting only dicts, strings, numbers and numpy arrays) or, when the stage has already
    read them, are handed over as loaded (``preloaded``: resolved path -> model dict); Detectron2's
    own ``.pth`` checkpoints are read with ``torch.load(weights_only=True)``.
    """

    def __init__(self, model, save_dir: str = "", *, preloaded: dict[str, dict] | None = None, **checkpointables):
        super().__init__(model, save_dir, **checkpointables)
        self.preloaded = preloaded or {}

    def _load_file(self, filename):

        if filename.endswith(".pkl"):
            model = self.preloaded.get(str(Path(filename).resolve())) or read_converted(filename)
            return {"model": dict(model), "__author__": AUTHOR, "matching_heuristics": True}
        # weights_only, and any refusal as the project's sentence (torch's own would advise weights_only=False).
        loaded = safe_load(
            filename, "Detectron2 checkpoint", "delete it (and last_checkpoint beside it) to start this cell again"
        )
        return loaded if "model" in loaded else {"model": loaded}

    def save(self, name: str, **kwargs) -> None:
        """fvcore's ``save`` with ring's contracts: the model is checked finite on every rank (Detectron2
        stops at a non-finite loss, but one finite loss can still step the weights to inf, and the
        last iteration's step is never followed by a loss), and the checkpoint and ``last_checkpoint``
        are written to temporaries and renamed, so a kill mid-write leaves the previous pair intact."""
        if not self.save_dir:
            return
        state = self.model.state_dict()
        bad = health.first_non_finite(state)
        if bad is not None:
            iteration = kwargs.get("iteration")
            when = f"after iteration {iteration + 1}" if isinstance(iteration, int) else f"at checkpoint {name}"
            raise NonFinite(
                f"{self.save_dir}: tensor {bad} became non-finite {when} (Detectron2 counts "
                f"iterations, not epochs); {health.likely_cause(self._base_lr())}."
            )
        if not self.save_to_disk:  # ranks other than 0 checked, rank 0 writes
            return
        data = {"model": state, **{key: obj.state_dict() for key, obj in self.checkpointables.items()}, **kwargs}
        basename = f"{name}.pth"
        self.logger.info(f"Saving checkpoint to {os.path.join(self.save_dir, basename)}")
        atomic_write(Path(self.save_dir) / basename, lambda fh: torch.save(data, fh))
        self.tag_last_checkpoint(basename)

    def tag_last_checkpoint(self, last_filename_basename: str) -> None:
        atomic_write(Path(self.save_dir) / "last_checkpoint", lambda fh: fh.write(last_filename_basename.encode()))

    def _base_lr(self) -> float | None:
        # DefaultTrainer registers itself (a weak proxy) as the checkpointable "trainer"; its config's
        # BASE_LR is what the user set, not this step's warmed-up or decayed value.
        trainer = self.checkpointables.get("trainer")
        return float(trainer.cfg.SOLVER.BASE_LR) if trainer is not None else None


class Trainer(DefaultTrainer):
    def __init__(self, cfg):
        super().__init__(cfg)
        # The one checkpointer every hook and resume_or_load use, made safe in place (the hooks built
        # in DefaultTrainer.__init__ already hold this very object).
        self.checkpointer.__class__ = SafeCheckpointer
        self.checkpointer.preloaded = {}

    @classmethod
    def build_evaluator(cls, cfg, dataset_name, output_folder=None):
        kind = MetadataCatalog.get(dataset_name).evaluator_type
        if kind == "coco":
            tasks = (
                ("bbox",) + (("segm",) if cfg.MODEL.MASK_ON else ()) + (("keypoints",) if cfg.MODEL.KEYPOINT_ON else ())
            )
            output = output_folder or os.path.join(cfg.OUTPUT_DIR, "inference")
            return COCOEvaluator(dataset_name, tasks=tasks, distributed=True, output_dir=output, use_fast_impl=False)
        if kind == "pascal_voc":
            return PascalVOCDetectionEvaluator(dataset_name)
        raise ValueError(
            f"Dataset {dataset_name} has evaluator type {kind!r}; Table 4 evaluates COCO and Pascal VOC only."
        )

    def build_writers(self):
        # Detectron2's defaults: its event storage to the console, the JSON log and TensorBoard (README "TensorBoard
        # and W&B").
        return [
            CommonMetricPrinter(self.max_iter),
            JSONWriter(os.path.join(self.cfg.OUTPUT_DIR, TRAIN_LOG)),
            TensorboardXWriter(self.cfg.OUTPUT_DIR),
        ]

    def train(self):
        super().train()
        # DefaultTrainer returns its final evaluation only when TEST.EXPECTED_RESULTS is set; Table 4
        # always needs it (EvalHook runs it after the last iteration, also when resuming there).
        return self._last_eval_results

    def build_hooks(self):
        return [*super().build_hooks(), StopOnRequest()]


def main(argv=None) -> int:
    from detectron2.config import get_cfg
    from detectron2.engine import default_argument_parser, launch

    args = default_argument_parser().parse_args(argv)

    def run(args):
        cfg = get_cfg()
        cfg.merge_from_file(args.config_file)
        cfg.merge_from_list(args.opts)
        cfg.freeze()
        setup(cfg, args)
        configs.register([*cfg.DATASETS.TRAIN, *cfg.DATASETS.TEST], os.environ.get("DETECTRON2_DATASETS", "datasets"))
        if args.eval_only:
            model = Trainer.build_model(cfg)
            SafeCheckpointer(model, save_dir=cfg.OUTPUT_DIR).resume_or_load(cfg.MODEL.WEIGHTS, resume=args.resume)
            return Trainer.test(cfg, model)
        trainer = Trainer(cfg)
        trainer.resume_or_load(resume=args.resume)
        return trainer.train()

    launch(
        run,
        args.num_gpus,
        num_machines=args.num_machines,
        machine_rank=args.machine_rank,
        dist_url=args.dist_url,
        args=(args,),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
