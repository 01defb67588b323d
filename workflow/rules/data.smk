# Data check: runs before any training job of a dataset, so a missing dataset fails in seconds.


rule data_check:
    input:
        generated_data,
    output:
        DATA_OK,
    log:
        DATA_OK.replace(".ok", ".log"),  # its one sentence, for the failed-run summary
    params:
        root=config["data_root"],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.catalog check {wildcards.dataset} --data-root {params.root:q} --touch {output:q} 2>&1 | tee {log:q} >&2"


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
