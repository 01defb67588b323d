# Linear evaluation of a frozen pretrained encoder on its pretraining dataset (Table 1).


LINCLS_CONFIG = cell_file("lincls", "config.yaml")
LINCLS_HASH = cell_file("lincls", "config.hash")
LINCLS_LOG = cell_file("lincls", "lincls.log")
CELL_CONFIGS["lincls"] = CellConfig(
    LINCLS_CONFIG, lambda wc: stage_config("lincls", wc), hash=LINCLS_HASH, rerun="lincls"
)


rule lincls:
    input:
        cfg=ancient(LINCLS_CONFIG),  # CONFIG_HASH in cells.smk
        hash=LINCLS_HASH,
        pretrain_hash=PRETRAIN_HASH,
        encoder=PRETRAIN_ENCODER,
        companions=encoder_companions,  # CMC's encoder_ab.pt, found beside encoder.pt
        data=ancient(DATA_OK),
        store=ancient(cell_store_ok(lambda wc: stage_config("lincls", wc))),  # the prepared store it reads (prepare.smk), if any
        admitted=admitted("lincls", lambda wc: stage_config("lincls", wc), LINCLS_METRICS),  # no file
        planned=PLANNED.input("lincls", LINCLS_METRICS, launch_options("lincls")),  # no file
        stale=stale_evaluation(LINCLS_METRICS),  # STALE in common.smk: the plan's stale mark, if any  # a rerun data check (the dataset changed) never retrains a finished cell
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
