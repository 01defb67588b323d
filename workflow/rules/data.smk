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
        DATA_OK.replace(".ok", ".log"),  # its one sentence, for the failed-run summary
    params:
        root=config["data_root"],
        skip="--skip-checksums" if config.get("skip_checksums") else "",
        # A generated dataset is this workflow's output: its changes reach the check as the input's time.
        files=lambda wildcards: "" if wildcards.dataset in GENERATORS else dataset_fingerprint(wildcards.dataset, config["data_root"]),
    localrule: True
    shell:
        "{PYTHON:q} -m ring.catalog check {wildcards.dataset} --data-root {params.root:q} {params.skip} "
        "--stamp-dir results/{wildcards.grid}/data --writable results/{wildcards.grid} --touch {output:q} 2>&1 | tee {log:q} >&2"


rule generate_dataset:
    """An embedded dataset that code in the repository generates (the smoke grid's transfer column)."""
    output:
        GENERATED_DATA,
    params:
        root=config["data_root"],
    wildcard_constraints:
        dataset=_one_of(GENERATORS),
    localrule: True
    shell:
        "{PYTHON:q} -m ring.metadataset generate {wildcards.dataset} --data-root {params.root:q}"


rule fetch_data:
    """Download, verify and unpack every dataset the configured grid reads (README "Datasets"): run it
    on a login node with internet, `snakemake fetch_data [--config fetch_mirror=URL]`."""
    params:
        root=config["data_root"],
        grid=os.environ["RING_GRID_FILE"],  # the grid's file, whether it was given by name or by path
        mirror=f"--mirror {shlex.quote(config['fetch_mirror'])}" if config.get("fetch_mirror") else "",
        detectron2=shlex.quote(detection_datasets_root(config["grid"])),
    localrule: True
    shell:
        "{PYTHON:q} -m ring.catalog fetch --grid {params.grid:q} --grids-dir {GRID_DIR:q} --data-root {params.root:q} "
        "--detectron2-root {params.detectron2} {params.mirror}"
