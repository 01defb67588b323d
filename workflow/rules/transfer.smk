# Transfer (Table 3): each method's encoder, pretrained on the grid's source dataset, evaluated by
# the linear protocol on each transfer dataset.  One cell per (transfer dataset, method, seed).


rule transfer_config:
    output:
        TRANSFER_CELL + "/config.yaml",
    params:
        text=lambda wc: config_text(transfer_stage_config(wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    localrule: True
    shell:
        write_cell_config("transfer")


rule transfer:
    input:
        cfg=TRANSFER_CELL + "/config.yaml",
        encoder=lambda wc: transfer_encoders(wc)[0],
        companions=lambda wc: transfer_encoders(wc)[1:],
        pretrain_cfg=lambda wc: str(Path(transfer_encoders(wc)[0]).with_name("config.yaml")),  # UPSTREAM_CONFIG
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
    output:
        metrics=TRANSFER_CELL + "/metrics.json",
        manifest=TRANSFER_CELL + "/split-manifest.json",
    log:
        TRANSFER_CELL + "/transfer.log",
    params:
        out=lambda wc, output: cell_dir(output.metrics),
        launch=launch_options("transfer"),
    threads: stage_threads("transfer")
    shell:
        "OMP_NUM_THREADS={threads} {PYTHON:q} -m ring.launch transfer --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --encoder {input.encoder:q} --out {params.out:q} 2>&1 | tee {log:q}"


rule make_table3:
    input:
        lambda wc: transfer_metrics(wc.grid),
    output:
        table_outputs("table3"),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        methods=lambda wc: GRIDS[wc.grid].transfer_methods(),
        datasets=lambda wc: GRIDS[wc.grid].transfer["datasets"],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.tables table3 --out {params.prefix:q} --methods {params.methods} "
        "--datasets {params.datasets} --metrics {input:q}"
