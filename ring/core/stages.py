"""Every stage declared once: its config class, the module a job runs, the file it writes last, the files one run
leaves in its cell, its TensorBoard name, its collector and its check.  The tables keyed by stage (the launchers'
entry modules and outputs, the collectors, the plan-time checks, the reference's sections, a grid's blocks, the
estimate's finished cells, passes and fixed costs, the runs an edit sets aside, an evaluation's encoder argument and
kept outputs, the lineage's evaluations of an encoder itself, TensorBoard's tag prefixes) read :data:`STAGES`; a new
stage is one :func:`register_stage` call.

The ground floor cannot import the plan, the launchers or the stages' code, so a stage names its entry module, its
collector and its check by string, resolved (:func:`ring.core.refs.resolve`) only where they run.
"""

from __future__ import annotations

from dataclasses import dataclass

from ring.core.config import DetectionConfig, LinclsConfig, PretrainConfig, ToyCNCEConfig, TransferConfig
from ring.core.files import CHECKSUMS, KEPT, RUN_RECORD


@dataclass(frozen=True)
class Stage:
    name: str  # its folder under results/<grid>/ and its name on the command line (--stage, ring describe)
    config: type | None = None  # the config class its cells' config.yaml holds; None: no config file (prepare)
    # The module whose main(argv) a launcher runs (ring.cluster.jobs.StageJob); None: no job of its own (a study's
    # cells are pretraining jobs; the toy's rule runs its module itself).
    entry: str | None = None
    output: str | None = None  # the file it writes last in its folder: present means its outputs are complete
    run_files: tuple[str, ...] = ()  # what one run leaves in its cell (glob patterns): set aside together on an edit
    log: str | None = None  # its cells' TensorBoard tag prefix; None: it writes no TensorBoard log of ours
    # "module:function" putting back the outputs a COMPLETED job kept where Snakemake does not look (True when the
    # output is in place again); None: a job of it is submitted again and resumes from its checkpoint.
    collector: str | None = None
    check: str | None = None  # "module:function(cfg, where)": the plan-time check of its config
    grid_block: bool = False  # a grid has a block of its keys (pretrain:, lincls:, transfer:)
    reference: str | None = None  # its section of docs/configuration.md (ring describe); None: none
    priced: bool = False  # ring estimate --check reads its finished cells (ring.plan.estimate.check)
    # The pass of the end-to-end figures that prices its cells (ring.plan.estimate.pricing); None: none (detection's
    # figures are its own, ring.plan.estimate.detection).
    price_pass: str | None = None
    # The stage whose measured fixed costs per job (ring.plan.estimate.pricing) price its cells: the one whose code its
    # jobs run (a study's cells are pretraining jobs, a transfer's code is linear evaluation's); None: its own.
    fixed_costs: str | None = None
    # An evaluation: the argument of its entry naming the encoder it evaluates.  Its runs are kept per config and
    # encoder, and a finished one is collected (or restored, an edit undone) on the login node without a job.
    encoder_flag: str | None = None
    # An evaluation of the pretraining cell's encoder itself (linear, transfer), its lineage checked against that
    # cell (ring.plan.lineage.evaluated_config); False for one of the encoder converted to a backbone (detection).
    evaluates_encoder: bool = False
    # An evaluation's outputs kept under exported/ and recorded in export.json (ring.core.cell_runs), its output last.
    exported: tuple[str, ...] = ()
    # The wildcards naming its cells' folders under results/<grid>/<name>/, one level each, the last the seed's
    # (seed<N>): ring.core.cell_paths spells them for the workflow's patterns and the library's folders.  (): no cell
    # folders (a prepared shard is in its store).
    cell: tuple[str, ...] = ("dataset", "method", "seed")


STAGES: dict[str, Stage] = {}


def register_stage(stage: Stage) -> Stage:
    """Declare ``stage``; a name declared twice is refused (two declarations would disagree somewhere)."""
    if stage.name in STAGES:
        raise ValueError(f"Stage {stage.name!r} is declared twice; one declaration per stage (ring.core.stages).")
    STAGES[stage.name] = stage
    return stage


def stage(name: str) -> Stage:
    """The declaration of the stage ``name``; one sentence naming the declared ones otherwise."""
    if name not in STAGES:
        raise ValueError(f"Unknown stage {name!r}; stages are {', '.join(STAGES)}.")
    return STAGES[name]


def stages_with(fact: str) -> dict[str, Stage]:
    """The stages that declare ``fact`` (a field of :class:`Stage`), in declaration order."""
    return {name: declared for name, declared in STAGES.items() if getattr(declared, fact)}


def configured(cls: type) -> Stage | None:
    """The first stage whose config class is ``cls`` and that has a check: the one whose check a config runs."""
    return next((declared for declared in STAGES.values() if declared.config is cls and declared.check), None)


_RUN = ("log.jsonl", "events.out.tfevents.*", "steps", "provenance.json", "wandb-run.json", RUN_RECORD)
_EVALUATION_RUN = ("checkpoint*.pt", "metrics.json", *_RUN, CHECKSUMS, KEPT)
_EVALUATION = dict(collector="ring.cluster.launch:collect_evaluation", priced=True)
_METRICS = "metrics.json"

# Declaration order is the order of every derived table (the reference's sections, the launchers' stage lists).
register_stage(
    Stage(
        "pretrain",
        PretrainConfig,
        "ring.pretrain",
        "encoder.pt",
        ("checkpoint*.pt", "encoder*.pt", "export.json", KEPT, *_RUN[:3], "snapshot_epoch*.pt", *_RUN[3:]),
        log="pretrain",
        collector="ring.cluster.launch:collect_exports",
        check="ring.plan.checks.pretrain:check_pretrain",
        grid_block=True,
        reference="pretrain",
        priced=True,
        price_pass="pretraining",
    )
)
register_stage(
    Stage(
        "lincls",
        LinclsConfig,
        "ring.lincls",
        _METRICS,
        _EVALUATION_RUN,
        log="lincls",
        check="ring.plan.checks.stages:check_lincls",
        grid_block=True,
        reference="lincls",
        price_pass="linear evaluation",
        encoder_flag="--encoder",
        evaluates_encoder=True,
        exported=(_METRICS,),
        **_EVALUATION,
    )
)
register_stage(
    Stage(
        "transfer",
        TransferConfig,
        "ring.transfer",
        _METRICS,
        (*_EVALUATION_RUN, "split-manifest.json"),
        log="transfer",
        check="ring.plan.checks.stages:check_transfer",
        grid_block=True,
        reference="transfer",
        price_pass="transfer",
        fixed_costs="lincls",
        encoder_flag="--encoder",
        evaluates_encoder=True,
        exported=("split-manifest.json", _METRICS),
        **_EVALUATION,
    )
)
# Detectron2 writes its checkpoints (model_*.pth, named in last_checkpoint), its log and its config itself; the
# stage adds the config_hash stamp of cells from before run.json, and the COCO evaluator its inference/ folder.
# It evaluates the encoder converted to a Detectron2 backbone (--weights); a cell (no run.json: Detectron2 keeps its
# own checkpoints) is keyed by that backbone.
register_stage(
    Stage(
        "detection",
        DetectionConfig,
        "ring.detection.runner",
        _METRICS,
        ("model_*.pth", "last_checkpoint", "config_hash", "detectron2.yaml", "log.txt", "inference", *_EVALUATION_RUN),
        check="ring.plan.checks.stages:check_detection",
        reference="detection",
        encoder_flag="--weights",
        cell=("dataset", "method", "task", "seed"),  # {dataset}: the source whose encoders it converts
        exported=(_METRICS,),
        **_EVALUATION,
    )
)
# The appendix's studies: pretraining cells (their keys are PretrainConfig's) in a folder of their own.
register_stage(
    Stage(
        "study",
        PretrainConfig,
        output="encoder.pt",
        log="pretrain",
        check="ring.plan.checks.pretrain:check_pretrain",
        reference="studies",
        priced=True,
        cell=("study", "dataset", "method", "variant", "seed"),
        price_pass="pretraining",
        fixed_costs="pretrain",
    )
)
# One shard of a prepared store (ring.data.store), a CPU job; its record is ring.data.store_layout.SHARD_RECORD, in
# the shard's folder.
register_stage(Stage("prepare", entry="ring.prepare", output="shard.json", cell=()))
register_stage(
    Stage(
        "toy_cnce",
        ToyCNCEConfig,
        output=_METRICS,
        check="ring.plan.checks.stages:check_toy",
        reference="toy",
        cell=("seed",),
    )
)
