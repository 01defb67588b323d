# Transfer (Table 3): each method's encoder, pretrained on the grid's source dataset, evaluated by
# the linear protocol on each transfer dataset.  One cell per (transfer dataset, method, seed).
# {dataset} is the transfer dataset; the encoder is the grid's source column's.


include: "helpers/transfer.smk"


TRANSFER_CONFIG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.yaml"
TRANSFER_CONFIG_LOG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.log"
TRANSFER_HASH = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.hash"
TRANSFER_HASH_LOG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/config.hash.log"
TRANSFER_MANIFEST = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/split-manifest.json"
TRANSFER_LOG = "results/{grid}/transfer/{dataset}/{method}/seed{seed}/transfer.log"
TRANSFER_STATS = "results/{grid}/transfer/{dataset}"  # normalisation cache shared by the dataset's cells


rule transfer_config:
    input:
        TRANSFER_HASH,  # CONFIG_HASH in common.smk: its rule runs first
    output:
        TRANSFER_CONFIG,
    log:
        TRANSFER_CONFIG_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        text=lambda wc: config_text(transfer_stage_config(wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    shell:
        write_cell_config("transfer")


rule transfer_hash:
    output:
        TRANSFER_HASH,
    log:
        TRANSFER_HASH_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        results=results_key(transfer_stage_config),
    shell:
        write_hash()


rule transfer:
    input:
        cfg=ancient(TRANSFER_CONFIG),  # CONFIG_HASH in common.smk
        hash=TRANSFER_HASH,
        pretrain_hash=lambda wc: str(Path(transfer_encoders(wc)[0]).with_name("config.hash")),
        encoder=lambda wc: transfer_encoders(wc)[0],
        companions=lambda wc: transfer_encoders(wc)[1:],
        data=ancient(DATA_OK),
        stale=stale_evaluation(TRANSFER_METRICS),  # STALE in common.smk: no file, a forced rerun  # a rerun data check (the dataset changed) never retrains a finished cell
    output:
        metrics=TRANSFER_METRICS,
        manifest=TRANSFER_MANIFEST,
    log:
        TRANSFER_LOG,
    conda:
        RING_ENV
    threads: stage_threads("transfer")
    params:
        python=PYTHON,
        out=lambda wc, output: cell_dir(output.metrics),
        launch=launch_options("transfer"),
    shell:
        "OMP_NUM_THREADS={threads} {params.python:q} -m ring.cluster.launch transfer --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --encoder {input.encoder:q} --out {params.out:q} 2>&1 | tee {log:q}"


rule make_table3:
    input:
        lambda wc: transfer_metrics(wc.grid),
        stale=missing_cells("table3"),  # STALE in common.smk: no file, a forced rerun
    output:
        table_outputs("table3"),
    log:
        expand(TABLE_LOG, table="table3", allow_missing=True),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        methods=lambda wc: GRIDS[wc.grid].transfer_methods(),
        datasets=lambda wc: GRIDS[wc.grid].transfer["datasets"],
        # For the report caption: the source column whose encoders the cells read, and their features.
        source=lambda wc, input: cell_config(input).get("source", ""),
        features=lambda wc, input: feature_maps(input),
    shell:
        logged(
            "{params.python:q} -m ring.reports.tables table3 --out {params.prefix:q} --methods {params.methods} "
            "--datasets {params.datasets} --metrics {input:q}"
        )
