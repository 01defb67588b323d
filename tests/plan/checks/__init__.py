"""The plan-time checks (ring.plan.checks), tested through the real interface where they meet the user: a grid file
given by path to `snakemake -n`.  The grid below is valid, every block present; a test breaks one value of it."""

import copy

import yaml

from tests.workflow.runs import snakemake

# A valid grid on the embedded digits (1347 training images), every block present.
BASE = {
    "datasets": ["digits"],
    "methods": ["IR", "IRing", "MoCoRing"],
    "seeds": [0],
    "pretrain": {
        "all": {
            "epochs": 2,
            "batch_size": 64,
            "lr_milestones": [1],
            "resize": 32,
            "crop": 32,
            "bank_negatives": 256,
            "queue_size": 256,
            "ring_anneal_epochs": 1,
        }
    },
    "lincls": {"all": {"epochs": 2, "batch_size": 64, "resize": 32, "crop": 32}},
    "transfer": {"source": "digits", "datasets": ["shapes"], "all": {"resize": 32, "crop": 32, "batch_size": 64}},
    "toy_cnce": {"seeds": [0], "epochs": 2},
    "detection": {
        "source": "digits",
        "methods": ["IR"],
        "tasks": ["voc_det"],
        "datasets": "embedded",
        "all": {"num_gpus": 0, "overrides": {"SOLVER.MAX_ITER": 2}},
    },
    "studies": {
        "hard_negatives": {
            "dataset": "digits",
            "methods": ["IR", "IRing"],
            "seeds": [0],
            "pretrain": {
                "epochs": 2,
                "resize": 16,
                "crop": 16,
                "ring_inner": None,
                "ring_w_u": 100.0,
                "ring_anneal": "none",
            },
            "variants": {
                "source": {"snapshot_epochs": [0, 1]},
                "t10": {"ring_w_l": [90.0, 90.0], "init_from": {"method": "IR", "variant": "source", "epoch": 1}},
            },
            "variant_methods": {"source": ["IR"], "t10": ["IRing"]},
        }
    },
}


def with_value(values: dict, path: str, value) -> dict:
    out = copy.deepcopy(values)
    *parents, last = path.split("/")
    node = out
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return out


def plan(workdir, values, *extra):
    grid = workdir.parent / "mygrid.yaml"
    grid.write_text(yaml.safe_dump(values))
    return grid, snakemake(workdir, "-n", "all_tables", "--config", f"grid={grid}", *extra, check=False)


def refusals(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("ring: ")]
