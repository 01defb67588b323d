# Contrastive pretraining: one cell per (grid, dataset, method, seed).
# The cell config is written by a light rule whose params are the full config, its hash by another
# (CONFIG_HASH in cells.smk): a changed hyperparameter reruns exactly the cells it changes, a changed
# runtime knob only rewrites config.yaml.


PRETRAIN_LOG = cell_file("pretrain", "pretrain.log")
CELL_CONFIGS["pretrain"] = CellConfig(
    PRETRAIN_CONFIG, lambda wc: stage_config("pretrain", wc), hash=PRETRAIN_HASH, rerun="pretrain"
)


rule pretrain:
    input:
        cfg=ancient(PRETRAIN_CONFIG),  # CONFIG_HASH in cells.smk
        hash=PRETRAIN_HASH,
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
        store=ancient(cell_store_ok(lambda wc: stage_config("pretrain", wc))),  # the prepared store it reads (prepare.smk), if any
        stale=stale_encoder,  # STALE in common.smk: the plan's stale mark, if any
        admitted=admitted("pretrain", lambda wc: stage_config("pretrain", wc), PRETRAIN_ENCODER),  # no file
        planned=PLANNED.input("pretrain", PRETRAIN_ENCODER, launch_options("pretrain")),  # no file
    output:
        PRETRAIN_ENCODER,
    log:
        PRETRAIN_LOG,
    wildcard_constraints:
        method=one_of(set(METHODS) - set(two_encoder_methods())),
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
        method=one_of(two_encoder_methods()),
