# Data check: runs before any training job of a dataset, so a missing or corrupted dataset (or a
# results folder the jobs cannot write) fails in seconds.  It runs again whenever the dataset's
# files change (params: the size and modification time of its files, a few stats, torch-free),
# and its verified stamp (<dataset>.verified.json beside the .ok: what was verified, or that
# checksums were skipped) keeps reruns for other reasons from hashing again.  Consumers take the
# .ok as ancient(): a rerun check that passes never retrains a finished cell.


rule data_check:
    input:
        generated_data,
    output:
        DATA_OK,
    log:
        DATA_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        root=config["data_root"],
        skip="--skip-checksums" if config.get("skip_checksums") else "",
        stamps=lambda wildcards, output: cell_dir(output[0]),
        writable=lambda wildcards, output: str(Path(output[0]).parents[1]),
        # A generated dataset is this workflow's output: its changes reach the check as the input's time.
        files=lambda wildcards: (
            "" if wildcards.dataset in GENERATORS else dataset_fingerprint(wildcards.dataset, config["data_root"])
        ),
    shell:
        "{params.python:q} -m ring.data.verify check {wildcards.dataset} --data-root {params.root:q} {params.skip} "
        "--stamp-dir {params.stamps:q} --writable {params.writable:q} --touch {output:q} 2>&1 | tee {log:q} >&2"


rule generate_dataset:
    """An embedded dataset that code in the repository generates (the smoke grid's transfer column)."""
    output:
        GENERATED_DATA,
    log:
        GENERATED_LOG,
    wildcard_constraints:
        dataset=_one_of(GENERATORS),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        root=lambda wildcards, output: str(Path(output[0]).parents[1]),  # the data root it lies under
    shell:
        logged("{params.python:q} -m ring.data.metadataset generate {wildcards.dataset} --data-root {params.root:q}")


rule fetch_data:
    """Download, verify and unpack every dataset the configured grid reads (README "Datasets"): run it
    on a login node with internet, `snakemake fetch_data [--config fetch_mirror=URL]`."""
    log:
        expand(FETCH_LOG, grid=config["grid"]),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        root=config["data_root"],
        grid=GRID_FILE,
        grids_dir=GRID_DIR,
        mirror=f"--mirror {shlex.quote(config['fetch_mirror'])}" if config.get("fetch_mirror") else "",
        detectron2=shlex.quote(detection_datasets_root(config["grid"])),
    shell:
        logged(
            "{params.python:q} -m ring.data.fetch --grid {params.grid:q} --grids-dir {params.grids_dir:q} "
            "--data-root {params.root:q} --detectron2-root {params.detectron2} {params.mirror}"
        )
