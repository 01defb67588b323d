# Contrastive pretraining: one cell per (grid, dataset, method, seed).
# The cell config is written by a light rule whose params are the full config, so a changed
# hyperparameter reruns exactly the cells it changes.


rule pretrain_config:
    output:
        PRETRAIN_CONFIG,
    log:
        PRETRAIN_CONFIG_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        text=lambda wc: config_text(stage_config("pretrain", wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    shell:
        write_cell_config("pretrain")


rule pretrain:
    input:
        cfg=PRETRAIN_CONFIG,
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
    output:
        PRETRAIN_ENCODER,
    log:
        PRETRAIN_LOG,
    wildcard_constraints:
        method=_one_of(set(METHODS) - set(two_encoder_methods())),
    conda:
        RING_ENV
    threads: stage_threads("pretrain")
    params:
        python=PYTHON,
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("pretrain"),
    shell:
        "OMP_NUM_THREADS={threads} {params.python:q} -m ring.cluster.launch pretrain --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --out {params.out:q} 2>&1 | tee {log:q}"


# CMC and its variants: the same job, exporting the L trunk (encoder.pt) and the ab trunk.
use rule pretrain as pretrain_two_encoders with:
    output:
        expand(PRETRAIN_FILE, name=["encoder.pt", "encoder_ab.pt"], allow_missing=True),
    wildcard_constraints:
        method=_one_of(two_encoder_methods()),
