# Data check: runs before any training job of a dataset, so a missing dataset fails in seconds.


rule data_check:
    input:
        generated_data,
    output:
        DATA_OK,
    params:
        root=config["data_root"],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.catalog check {wildcards.dataset} --data-root {params.root:q} --touch {output:q}"


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
        mirror=f"--mirror {shlex.quote(config['fetch_mirror'])}" if config.get("fetch_mirror") else "",
        detectron2=shlex.quote(detection_datasets_root(config["grid"])),
    localrule: True
    shell:
        "{PYTHON:q} -m ring.catalog fetch --grid {config[grid]} --grids-dir {GRID_DIR:q} --data-root {params.root:q} "
        "--detectron2-root {params.detectron2} {params.mirror}"
