# Transfer (Table 3): each method's encoder, pretrained on the grid's source dataset, evaluated by
# the linear protocol on each transfer dataset.  One cell per (transfer dataset, method, seed).
# {dataset} is the transfer dataset; the encoder is the grid's source column's.


TRANSFER_CONFIG = cell_file("transfer", "config.yaml")
TRANSFER_HASH = cell_file("transfer", "config.hash")
TRANSFER_MANIFEST = cell_file("transfer", "split-manifest.json")
TRANSFER_LOG = cell_file("transfer", "transfer.log")
TRANSFER_STATS = cell_file("transfer", cell=("dataset",))  # normalisation cache shared by the dataset's cells
CELL_CONFIGS["transfer"] = CellConfig(TRANSFER_CONFIG, transfer_stage_config, hash=TRANSFER_HASH, rerun="transfer")


rule transfer:
    input:
        cfg=ancient(TRANSFER_CONFIG),  # CONFIG_HASH in cells.smk
        hash=TRANSFER_HASH,
        pretrain_hash=lambda wc: str(Path(transfer_encoders(wc)[0]).with_name("config.hash")),
        encoder=lambda wc: transfer_encoders(wc)[0],
        companions=lambda wc: transfer_encoders(wc)[1:],
        data=ancient(DATA_OK),
        admitted=admitted("transfer", transfer_stage_config, TRANSFER_METRICS),  # no file: the plan's SLURM check
        planned=PLANNED.input("transfer", [TRANSFER_METRICS, TRANSFER_MANIFEST], launch_options("transfer")),
        stale=stale_evaluation(TRANSFER_METRICS),  # STALE in common.smk: the plan's stale mark, if any  # a rerun data check (the dataset changed) never retrains a finished cell
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
