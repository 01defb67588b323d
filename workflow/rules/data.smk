# Data check: runs before any training job of a dataset, so a missing or corrupted dataset (or a
# results folder the jobs cannot write) fails in seconds.  Its output is temporary, so it runs again
# before every later job of the dataset; the verified stamp beside it (<dataset>.verified.json, the
# record of what was verified, or that checksums were skipped) makes that cheap until a file changes.


rule data_check:
    input:
        generated_data,
    output:
        temp(DATA_OK),
    log:
        DATA_OK.replace(".ok", ".log"),  # its one sentence, for the failed-run summary
    params:
        root=config["data_root"],
        skip="--skip-checksums" if config.get("skip_checksums") else "",
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
