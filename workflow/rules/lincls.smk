# Linear evaluation of a frozen pretrained encoder on its pretraining dataset (Table 1).


include: "helpers/lincls.smk"


LINCLS_CONFIG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.yaml"
LINCLS_CONFIG_LOG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.log"
LINCLS_HASH = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.hash"
LINCLS_HASH_LOG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/config.hash.log"
LINCLS_LOG = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/lincls.log"


rule lincls_config:
    input:
        LINCLS_HASH,  # CONFIG_HASH in common.smk: its rule runs first
    output:
        LINCLS_CONFIG,
    log:
        LINCLS_CONFIG_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        text=lambda wc: config_text(stage_config("lincls", wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    shell:
        write_cell_config("lincls")


rule lincls_hash:
    output:
        LINCLS_HASH,
    log:
        LINCLS_HASH_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        results=results_key(lambda wc: stage_config("lincls", wc)),
    shell:
        write_hash()


rule lincls:
    input:
        cfg=ancient(LINCLS_CONFIG),  # CONFIG_HASH in common.smk
        hash=LINCLS_HASH,
        pretrain_hash=PRETRAIN_HASH,
        encoder=PRETRAIN_ENCODER,
        companions=encoder_companions,  # CMC's encoder_ab.pt, found beside encoder.pt
        data=ancient(DATA_OK),
        store=ancient(cell_store_ok(lambda wc: stage_config("lincls", wc))),  # the prepared store it reads (prepare.smk), if any
        stale=stale_evaluation(LINCLS_METRICS),  # STALE in common.smk: no file, a forced rerun  # a rerun data check (the dataset changed) never retrains a finished cell
    output:
        LINCLS_METRICS,
    log:
        LINCLS_LOG,
    conda:
        RING_ENV
    threads: stage_threads("lincls")
    params:
        python=PYTHON,
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("lincls"),
    shell:
        "OMP_NUM_THREADS={threads} {params.python:q} -m ring.cluster.launch lincls --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --encoder {input.encoder:q} --out {params.out:q} 2>&1 | tee {log:q}"
