# The appendix's toy CNCE experiment (ring.toy_cnce): one CPU cell per seed, then its table (tables.smk).


TOY_CNCE_CONFIG = cell_file("toy_cnce", "config.yaml")
TOY_CNCE_METRICS = cell_file("toy_cnce", "metrics.json")
TOY_CNCE_LOG = cell_file("toy_cnce", "toy_cnce.log")
# A toy cell's config.yaml is written only, and read as a plain input: any edit reruns the seed (seconds of CPU).
CELL_CONFIGS["toy_cnce"] = CellConfig(TOY_CNCE_CONFIG, lambda wc: GRIDS[wc.grid].toy_cnce_config(int(wc.seed)))


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
