# The appendix's toy CNCE experiment (ring.toy_cnce): one CPU cell per seed, then its table.


include: "helpers/toy_cnce.smk"


TOY_CNCE_CONFIG = "results/{grid}/toy_cnce/seed{seed}/config.yaml"
TOY_CNCE_CONFIG_LOG = "results/{grid}/toy_cnce/seed{seed}/config.log"
TOY_CNCE_METRICS = "results/{grid}/toy_cnce/seed{seed}/metrics.json"
TOY_CNCE_LOG = "results/{grid}/toy_cnce/seed{seed}/toy_cnce.log"


rule toy_cnce_config:
    output:
        TOY_CNCE_CONFIG,
    log:
        TOY_CNCE_CONFIG_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        text=lambda wc: config_text(GRIDS[wc.grid].toy_cnce_config(int(wc.seed))),
    # A shell job, not `run:`: Snakemake runs `run:` jobs in a fresh interpreter (~1.5 s each).
    shell:
        logged("printf '%s' {params.text:q} > {output:q}")


rule toy_cnce:
    input:
        cfg=TOY_CNCE_CONFIG,
    output:
        TOY_CNCE_METRICS,
    log:
        TOY_CNCE_LOG,
    conda:
        RING_ENV
    # Tiny MLPs: one thread each, so seeds run side by side.
    threads: 1
    params:
        python=PYTHON,
        out=lambda wc, output: cell_dir(output[0]),
    shell:
        "OMP_NUM_THREADS={threads} {params.python:q} -m ring.toy_cnce --config {input.cfg:q} --out {params.out:q}"
        " 2>&1 | tee {log:q}"


rule make_table_toy_cnce:
    input:
        lambda wc: toy_cnce_metrics(wc.grid),
    output:
        table_outputs("table_toy_cnce"),
    log:
        expand(TABLE_LOG, table="table_toy_cnce", allow_missing=True),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        # For the report caption: the cells' protocol and the mutual information they estimate.
        toy=lambda wc, input: cell_config(input),
        true_mi=lambda wc, input: next((m["true_mi"] for m in cell_metrics(input) if "true_mi" in m), None),
    shell:
        logged("{params.python:q} -m ring.reports.tables table_toy_cnce --out {params.prefix:q} --metrics {input:q}")
