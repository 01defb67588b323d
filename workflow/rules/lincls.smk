# Linear evaluation of a frozen pretrained encoder on its pretraining dataset (Table 1).


rule lincls_config:
    output:
        LINCLS_CELL + "/config.yaml",
    params:
        text=lambda wc: config_text(stage_config("lincls", wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    localrule: True
    shell:
        write_cell_config("lincls")


rule lincls:
    input:
        cfg=LINCLS_CELL + "/config.yaml",
        encoder=PRETRAIN_CELL + "/encoder.pt",
        companions=encoder_companions,  # CMC's encoder_ab.pt, found beside encoder.pt
        # See UPSTREAM_CONFIG in common.smk: an edited pretraining config reruns this cell until both are done.
        pretrain_cfg=PRETRAIN_CELL + "/config.yaml",
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
    output:
        LINCLS_CELL + "/metrics.json",
    log:
        LINCLS_CELL + "/lincls.log",
    params:
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("lincls"),
    threads: stage_threads("lincls")
    shell:
        "OMP_NUM_THREADS={threads} {PYTHON:q} -m ring.launch lincls --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --encoder {input.encoder:q} --out {params.out:q} 2>&1 | tee {log:q}"
