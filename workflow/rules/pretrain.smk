# Contrastive pretraining: one cell per (grid, dataset, method, seed).
# The cell config is written by a light rule whose params are the full config, so a changed
# hyperparameter reruns exactly the cells it changes.


rule pretrain_config:
    output:
        PRETRAIN_CELL + "/config.yaml",
    params:
        text=lambda wc: config_text(stage_config("pretrain", wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    localrule: True
    shell:
        write_cell_config("pretrain")


rule pretrain:
    wildcard_constraints:
        method=_one_of(set(METHODS) - set(two_encoder_methods())),
    input:
        cfg=PRETRAIN_CELL + "/config.yaml",
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
    output:
        PRETRAIN_CELL + "/encoder.pt",
    log:
        PRETRAIN_CELL + "/pretrain.log",
    params:
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("pretrain"),
    threads: stage_threads("pretrain")
    shell:
        "OMP_NUM_THREADS={threads} {PYTHON:q} -m ring.launch pretrain --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --out {params.out:q} 2>&1 | tee {log:q}"


# CMC and its variants: the same job, exporting the L trunk (encoder.pt) and the ab trunk.
use rule pretrain as pretrain_two_encoders with:
    wildcard_constraints:
        method=_one_of(two_encoder_methods()),
    output:
        PRETRAIN_CELL + "/encoder.pt",
        PRETRAIN_CELL + "/encoder_ab.pt",
