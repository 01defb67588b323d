# The appendix's toy CNCE experiment (ring.toy_cnce): one CPU cell per seed, then its table.


rule toy_cnce_config:
    output:
        TOY_CNCE_CELL + "/config.yaml",
    params:
        text=lambda wc: config_text(GRIDS[wc.grid].toy_cnce_config(int(wc.seed))),
    localrule: True
    # A shell job, not `run:`: Snakemake runs `run:` jobs in a fresh interpreter (~1.5 s each).
    shell:
        "printf '%s' {params.text:q} > {output:q}"


rule toy_cnce:
    input:
        cfg=TOY_CNCE_CELL + "/config.yaml",
    output:
        TOY_CNCE_CELL + "/metrics.json",
    log:
        TOY_CNCE_CELL + "/toy_cnce.log",
    params:
        out=lambda wc, output: cell_dir(output[0]),
    # Tiny MLPs: one thread each, so seeds run side by side.
    threads: 1
    shell:
        "OMP_NUM_THREADS={threads} {PYTHON:q} -m ring.toy_cnce --config {input.cfg:q} --out {params.out:q}"
        " 2>&1 | tee {log:q}"


rule make_table_toy_cnce:
    input:
        lambda wc: toy_cnce_metrics(wc.grid),
    output:
        table_outputs("table_toy_cnce"),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
    localrule: True
    shell:
        "{PYTHON:q} -m ring.tables table_toy_cnce --out {params.prefix:q} --metrics {input:q}"
