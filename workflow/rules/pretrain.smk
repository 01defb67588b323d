# Contrastive pretraining: one cell per (grid, dataset, method, seed).
# The cell config is written by a light rule whose params are the full config, its hash by another
# (CONFIG_HASH in common.smk): a changed hyperparameter reruns exactly the cells it changes, a changed
# runtime knob only rewrites config.yaml.


include: "helpers/pretrain.smk"


PRETRAIN_CONFIG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/config.yaml"
PRETRAIN_CONFIG_LOG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/config.log"
PRETRAIN_HASH_LOG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/config.hash.log"
PRETRAIN_LOG = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/pretrain.log"


rule pretrain_config:
    input:
        PRETRAIN_HASH,  # CONFIG_HASH in common.smk: its rule runs first
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


rule pretrain_hash:
    output:
        PRETRAIN_HASH,
    log:
        PRETRAIN_HASH_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        results=results_key(lambda wc: stage_config("pretrain", wc)),
    shell:
        write_hash()


rule pretrain:
    input:
        cfg=ancient(PRETRAIN_CONFIG),  # CONFIG_HASH in common.smk
        hash=PRETRAIN_HASH,
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
        store=ancient(cell_store_ok(lambda wc: stage_config("pretrain", wc))),  # the prepared store it reads (prepare.smk), if any
        stale=stale_encoder,  # STALE in common.smk: no file, a forced rerun
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
