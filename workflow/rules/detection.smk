# Table 4: each pretrained encoder converted to a Detectron2 backbone, then one frozen-backbone
# Detectron2 cell per (method, task, seed); table4 aggregates them.


rule detection_embedded:
    """The generated COCO/VOC-format default dataset (grids with `detection: {datasets: embedded}`)."""
    output:
        directory(DETECTION_EMBEDDED),
    localrule: True
    shell:
        "{PYTHON:q} -m ring.detection.embedded --out {output:q}"


rule detection_convert:
    """torchvision encoder -> Detectron2 .pkl, proven complete and numerically equal (ring.detection.convert)."""
    input:
        encoder=PRETRAIN_CELL + "/encoder.pt",
        pretrain_cfg=PRETRAIN_CELL + "/config.yaml",  # UPSTREAM_CONFIG in common.smk
    output:
        DETECTION_WEIGHTS,
    log:
        DETECTION_WEIGHTS + ".log",
    threads: 1
    shell:
        "OMP_NUM_THREADS=1 {PYTHON:q} -m ring.detection.convert --encoder {input.encoder:q} --out {output:q} 2>&1 | tee {log:q}"


rule detection_config:
    output:
        DETECTION_CELL + "/config.yaml",
    params:
        text=lambda wc: config_text(detection_cell_config(wc)),
    localrule: True
    # A shell job, not `run:`: Snakemake runs `run:` jobs in a fresh interpreter (~1.5 s each).
    shell:
        "printf '%s' {params.text:q} > {output:q}"


rule detection:
    input:
        cfg=DETECTION_CELL + "/config.yaml",
        weights=DETECTION_WEIGHTS,
        data=detection_data,
    output:
        DETECTION_CELL + "/metrics.json",
    log:
        DETECTION_CELL + "/detection.log",
    params:
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("detection"),
    threads: stage_threads("detection")
    shell:
        "OMP_NUM_THREADS={threads} {PYTHON:q} -m ring.launch detection --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --weights {input.weights:q} --out {params.out:q} 2>&1 | tee {log:q}"


rule make_table4:
    input:
        lambda wc: detection_metrics(wc.grid),
    output:
        table_outputs("table4"),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        methods=lambda wc: GRIDS[wc.grid].detection["methods"],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.tables table4 --out {params.prefix:q} --methods {params.methods} --metrics {input:q}"
