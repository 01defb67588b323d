# Data check: runs before any training job of a dataset, so a missing dataset fails in seconds.


rule data_check:
    output:
        DATA_OK,
    params:
        root=config["data_root"],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.catalog check {wildcards.dataset} --data-root {params.root:q} --touch {output:q}"
