"""The ``ring`` command: one name for everything a user types, each subcommand a module's own ``main``.

    ring estimate --grid paper          # = python -m ring.cluster.batch estimate --grid paper
    ring fetch cifar10 --data-root D    # = python -m ring.fetch cifar10 --data-root D
    ring --help                         # every subcommand, one line each

Nothing is parsed here beyond the subcommand's name: the rest of the line goes to the module's ``main``, so a
subcommand's options, help and sentences are the module's, and ``python -m <module>`` (what the workflow's rules
run, with the environment's interpreter: docs/library.md) behaves the same.  The target module is imported only
when its subcommand runs, so ``ring --help`` and the login-node commands never load torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass

import ring


@dataclass(frozen=True)
class Command:
    name: str
    target: str  # "module:function", called with the user's arguments after ``argv``
    help: str  # the one line of ``ring --help``
    argv: tuple[str, ...] = ()  # put first: the module's own subcommand, when its main has several

    def function(self):
        module, name = self.target.split(":")
        try:
            return getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as err:
            if (err.name or "ring").split(".")[0] == "ring":
                raise  # our own module missing is a bug, not the environment's
            raise SystemExit(
                f"ring: `ring {self.name}` needs the package {err.name}, which this environment lacks; "
                "install it there (README.md, Install; Detectron2: docs/detection.md)."
            ) from None


def _batch(name: str, help: str) -> Command:
    return Command(name, "ring.cluster.batch:main", help, (name,))


# In the order of a user's day: data, plan, run, watch, report.
COMMANDS = (
    Command("fetch", "ring.fetch:main", "download and verify datasets (by name, or a grid's)"),
    Command("check", "ring.data.verify:main", "check a dataset under the data root (the data check)", ("check",)),
    Command("generate", "ring.data.metadataset:main", "generate an embedded transfer dataset (shapes)", ("generate",)),
    Command(
        "manifest", "ring.data.metadataset:main", "print a transfer dataset's split: counts and SHA-256", ("manifest",)
    ),
    Command("describe", "ring.plan.reference:describe_main", "describe a stage's configuration keys", ("describe",)),
    Command("run", "ring.cluster.workflow:main", "run the workflow here: targets, --profile local|slurm, --grid"),
    _batch("estimate", "a grid's predicted GPU-hours (torch-free, seconds)"),
    _batch("submit", "submit a grid's missing cells to SLURM: one job array"),
    _batch("status", "each cell: done/diverged/stale/running/pending/failed/missing"),
    _batch("cancel", "cancel a grid's recorded SLURM jobs"),
    _batch("prune", "delete superseded runs and cell folders the grid no longer names"),
    Command("rerun", "ring.plan.rerun:main", "what an edited cell config does: continue or restart"),
    Command("launch", "ring.cluster.launch:main", "run one cell's stage, locally or on SLURM"),
    Command("prepare", "ring.prepare:main", "stage: build or check an image folder's prepared store"),
    Command("pretrain", "ring.pretrain:main", "stage: contrastive pretraining of one cell"),
    Command("lincls", "ring.lincls:main", "stage: linear evaluation of a frozen encoder"),
    Command("transfer", "ring.transfer:main", "stage: linear evaluation on a transfer dataset"),
    Command("toy-cnce", "ring.toy_cnce:main", "stage: the appendix's toy NCE/CNCE on Gaussians"),
    Command("detection", "ring.detection.runner:main", "stage: Table 4's detection training and evaluation"),
    Command(
        "install-detection", "ring.plan.detection_tasks:install_main", "install Detectron2 here (CPU, or --cluster)"
    ),
    Command("convert", "ring.detection.convert:main", "convert an encoder into Detectron2 backbone weights"),
    Command("train-net", "ring.detection.train_net:main", "Detectron2's training script with Ring's datasets"),
    Command("table", "ring.reports.tables.registry:main", "aggregate finished cells into a paper table"),
    Command("figure", "ring.reports.figures:main", "build an appendix study's figure or table"),
    Command("reference", "ring.plan.reference:main", "write docs/configuration.md, the keys' reference"),
)
REGISTRY = {command.name: command for command in COMMANDS}


def parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {command.name:10} {command.help}" for command in COMMANDS)
    top = argparse.ArgumentParser(
        prog="ring",
        usage="ring [-h] [--version] COMMAND ...",
        description="Reproduce and extend the Ring paper's benchmarks.",
        epilog=f"commands:\n{listing}\n\n`ring COMMAND --help` tells a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"ring-bench {ring.__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS, required=True)
    for command in COMMANDS:
        sub.add_parser(command.name, add_help=False)
    return top


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = parser().parse_args(argv[:1]).command  # the command's own parser reads the rest
    command = REGISTRY[name]
    function = command.function()
    # The module's parser names itself after sys.argv[0]: "ring status", not "batch.py status".
    program, sys.argv[0] = sys.argv[0], "ring" if command.argv == (name,) else f"ring {name}"
    try:
        return function([*command.argv, *argv[1:]])
    finally:
        sys.argv[0] = program


if __name__ == "__main__":
    sys.exit(main())
