"""The prepare stage in the workflow: an image-folder grid builds its store once, checks it, and every pass reads it."""

import json
from pathlib import Path

from ring.core import catalog
from ring.data import store_layout
from tests.workflow.runs import job_counts, snakemake, write_grid

# digits_folder (the colour digits as a PNG image folder) at its store size: IR pretrained one epoch, then evaluated.
FOLDER_GRID = {
    "datasets": ["digits_folder"],
    "methods": ["IR"],
    "seeds": [0],
    "pretrain": {
        "all": {
            "epochs": 1,
            "batch_size": 64,
            "lr_milestones": [],
            "resize": 32,
            "crop": 32,
            "bank_negatives": 256,
            "knn_every": 1,  # the kNN monitor reads the store too
            "num_workers": 0,
            "augment": "device",  # the store's batches through the device views (the CPU here)
            "keep_checkpoint": "none",
        }
    },
    "lincls": {
        "all": {"epochs": 30, "batch_size": 64, "resize": 32, "crop": 32, "augmentation": "none", "num_workers": 0}
    },
    "resources": {"pretrain": {"threads": 1}, "lincls": {"threads": 1}},
}


def test_the_workflow_store_matches_the_librarys_path(workdir):
    text = (workdir / "workflow" / "rules" / "prepare.smk").read_text()
    assert 'STORE = str(Path(config["data_root"], "{dataset}", "store", "{format}-{size}"))' in text
    assert store_layout.store_dir(Path("data", "{dataset}"), "{format}", "{size}") == Path(
        "data/{dataset}/store/{format}-{size}"
    )


def test_a_folder_grid_prepares_its_store_once_and_reads_it_in_every_pass(workdir):
    write_grid(workdir, "folder", FOLDER_GRID)
    data = workdir / "data"
    args = ("--profile", "profiles/local", "table1", "--config", "grid=folder", f"data_root={data}")
    plan = job_counts(snakemake(workdir, *args, "-n").stdout)
    shards = store_layout.n_shards(1347) + store_layout.n_shards(450)
    assert {k: plan[k] for k in ("prepare_listing", "prepare_shard", "prepare_store", "store_check")} == {
        "prepare_listing": 1,
        "prepare_shard": shards,
        "prepare_store": 1,
        "store_check": 1,
    }
    snakemake(workdir, *args)
    built = data / "digits_folder" / "store" / f"jpeg95-{catalog.DATASETS['digits_folder'].store_size}"
    manifest = json.loads((built / store_layout.MANIFEST).read_text())
    assert manifest["splits"]["train"]["images"] == 1347 and manifest["splits"]["test"]["images"] == 450
    assert (workdir / "results" / "folder" / "data" / "digits_folder.jpeg95-32.ok").is_file()
    log = (workdir / "results" / "folder" / "pretrain" / "digits_folder" / "IR" / "seed0" / "log.jsonl").read_text()
    assert "knn_top1" in log
    assert (workdir / "results" / "folder" / "tables" / "table1.md").is_file()
    # Built once: a second grid of the same data root plans no prepare job, only its own check of the store.
    other = {**FOLDER_GRID, "seeds": [1]}
    write_grid(workdir, "folder2", other)
    again = job_counts(snakemake(workdir, *args[:3], "--config", "grid=folder2", f"data_root={data}", "-n").stdout)
    assert "prepare_shard" not in again and "prepare_store" not in again and again["store_check"] == 1
    # store: none reads the files: no store input at all.
    write_grid(
        workdir,
        "files",
        {
            **FOLDER_GRID,
            "pretrain": {"all": {**FOLDER_GRID["pretrain"]["all"], "store": "none"}},
            "lincls": {"all": {**FOLDER_GRID["lincls"]["all"], "store": "none"}},
        },
    )
    files = job_counts(snakemake(workdir, *args[:3], "--config", "grid=files", f"data_root={data}", "-n").stdout)
    assert "store_check" not in files


def test_prepare_stores_builds_a_deleted_store_again_and_stops_at_a_damaged_one(workdir):
    """Issue 52 item 1: after the store was deleted, `snakemake prepare_stores` said "Nothing to be done" (the grid's
    check stamp stood); now the check reruns once the store's manifest or shards change (store_check's params), so a
    deleted store is built again, and a damaged shard stops the run with the sentence naming `ring prepare build`,
    which mends it."""
    import shlex
    import shutil
    import subprocess
    import sys

    write_grid(workdir, "folder", FOLDER_GRID)
    data = workdir / "data"
    args = ("--profile", "profiles/local", "prepare_stores", "--config", "grid=folder", f"data_root={data}")
    snakemake(workdir, *args)
    built = data / "digits_folder" / "store" / f"jpeg95-{catalog.DATASETS['digits_folder'].store_size}"
    shutil.rmtree(built)
    rebuilt = snakemake(workdir, *args)
    again = job_counts(rebuilt.stdout + rebuilt.stderr)
    assert {k: again.get(k) for k in ("prepare_listing", "prepare_store", "store_check")} == dict.fromkeys(
        ("prepare_listing", "prepare_store", "store_check"), 1
    )
    unchanged = snakemake(workdir, *args)
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr
    shard = built / "train" / "shard-00000" / store_layout.SHARD_DATA
    damaged = bytearray(shard.read_bytes())
    damaged[100] ^= 0xFF
    shard.write_bytes(bytes(damaged))
    refused = snakemake(workdir, *args, check=False)
    sentence = (
        f"ring: {shard} does not match its recorded SHA-256 (damaged or edited since the store was built); run "
        f"`ring prepare build digits_folder --data-root {data} --format jpeg95`, which builds that file again."
    )
    assert refused.returncode != 0 and sentence in refused.stderr, refused.stderr[-3000:]
    command = shlex.split(sentence.split("`")[1])
    subprocess.run([sys.executable, "-m", "ring.cli", *command[1:]], cwd=workdir, check=True, timeout=300)
    snakemake(workdir, *args)
    assert store_layout.verify(built, "jpeg95", catalog.DATASETS["digits_folder"].store_size)
