# The prepare stage: an image-folder dataset's images resized once to the catalog's store size (the paper's
# Resize((256, 256)) for ImageNet) and packed into a prepared store (ring.data.store) under the data root, which every
# grid's cells of that size then read (docs/datasets.md, "The prepared store").  The listing, one job per shard (a
# CPU job: profiles/slurm submits it with the `prepare` resources), the index and manifest, then each grid's check.
# Every step resumes: a shard whose record exists is kept, so an interrupted build continues where it stopped.


from types import SimpleNamespace

from ring.core.files import read_record

from ring.data.store_layout import (
    BYTES_PER_PIXEL,
    MANIFEST,
    SAMPLES,
    SHARD,
    SHARD_RECORD,
    SPLIT_FOLDERS,
    cell_store,
    fingerprint as store_fingerprint,
    n_shards,
)

STORE_SPLITS = list(SPLIT_FOLDERS)  # train, test
# <data_root>/<dataset>/store/<format>-<size>: ring.data.store_layout.store_dir (tests/workflow keeps the two equal)
STORE = str(Path(config["data_root"], "{dataset}", "store", "{format}-{size}"))
STORE_LISTINGS = [str(Path(STORE, split, SAMPLES)) for split in STORE_SPLITS]
STORE_SHARD = str(Path(STORE, "{split}", SHARD.split("{")[0] + "{shard}", SHARD_RECORD))
STORE_MANIFEST = str(Path(STORE, MANIFEST))
STORE_LISTING_LOG = str(Path(STORE, "listing.log"))
STORE_MANIFEST_LOG = str(Path(STORE, "manifest.log"))
STORE_OK = "results/{grid}/data/{dataset}.{format}-{size}.ok"  # this grid's check of the store, beside DATA_OK
STORE_OK_LOG = "results/{grid}/data/{dataset}.{format}-{size}.log"


wildcard_constraints:
    format=one_of(BYTES_PER_PIXEL),  # the store formats
    size=r"\d+",
    split=one_of(STORE_SPLITS),
    shard=r"\d{5}",


rule prepare_stores:
    """Every prepared store the configured grid reads, built and checked (the cells build them on their own)."""
    input:
        grid_store_oks(config["grid"]),


rule prepare_listing:
    input:
        generated_data,  # an embedded generated dataset (digits_folder) is written first
    output:
        STORE_LISTINGS,
    log:
        STORE_LISTING_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        root=lambda wc, output: str(Path(output[0]).parents[4]),  # <root>/<dataset>/store/<f-s>/<split>/
    shell:
        logged(
            "{params.python:q} -m ring.prepare list {wildcards.dataset} --data-root {params.root:q} "
            "--format {wildcards.format}"
        )


rule prepare_shard:
    input:
        ancient(STORE_LISTINGS),
        admitted=admitted("prepare", output=STORE_SHARD),  # no file: the plan's SLURM check
        planned=PLANNED.input("prepare_shard", STORE_SHARD, launch_options("prepare")),  # no file
    output:
        STORE_SHARD,
    log:
        str(Path(STORE, "{split}", SHARD.split("{")[0] + "{shard}", "prepare.log")),
    conda:
        RING_ENV
    params:
        python=PYTHON,
        root=lambda wc, output: str(Path(output[0]).parents[5]),
        cell=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("prepare"),
    shell:
        logged(
            "{params.python:q} -m ring.cluster.launch prepare --cell {params.cell:q} {params.launch} -- shard "
            "{wildcards.dataset} --data-root {params.root:q} --format {wildcards.format} --split {wildcards.split} "
            "--shard {wildcards.shard}"
        )


rule prepare_store:
    input:
        store_shards,
    output:
        STORE_MANIFEST,
    log:
        STORE_MANIFEST_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        root=lambda wc, output: str(Path(output[0]).parents[3]),
    shell:
        logged(
            "{params.python:q} -m ring.prepare finish {wildcards.dataset} --data-root {params.root:q} "
            "--format {wildcards.format}"
        )


rule store_check:
    """The store against its manifest (every shard's SHA-256 unless skip_checksums), once per grid, before any cell."""
    input:
        ancient(STORE_MANIFEST),
        changed=store_changed,  # the check's stale mark when the store was deleted, damaged or built since its stamp
    output:
        STORE_OK,
    log:
        STORE_OK_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        root=lambda wc, input: str(Path(input[0]).parents[3]),
        skip="--skip-checksums" if config.get("skip_checksums") else "",
    shell:
        logged(
            "{params.python:q} -m ring.prepare check {wildcards.dataset} --data-root {params.root:q} "
            "--format {wildcards.format} {params.skip} --touch {output:q}"
        )
