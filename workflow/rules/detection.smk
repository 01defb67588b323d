# Table 4: each pretrained encoder converted to a Detectron2 backbone, then one frozen-backbone
# Detectron2 cell per (method, task, seed); table4 (tables.smk) aggregates them.


from ring.plan.detection_tasks import TASKS as DETECTION_TASKS


wildcard_constraints:
    task=one_of(DETECTION_TASKS),


# Converted backbone of one pretrained encoder, and one Detectron2 cell per (method, task, seed).
DETECTION_WEIGHTS = cell_file("detection", "backbone.pkl", BACKBONE)
DETECTION_WEIGHTS_LOG = cell_file("detection", "backbone.pkl.log", BACKBONE)
DETECTION_CONFIG = cell_file("detection", "config.yaml")
DETECTION_HASH = cell_file("detection", "config.hash")
DETECTION_METRICS = cell_file("detection", "metrics.json")
DETECTION_LOG = cell_file("detection", "detection.log")
DETECTION_EMBEDDED_LOG = "results/{grid}/detection/datasets.log"
# An edited cell that ran keeps its previous run under runs/ before its job starts, as every stage's does.
CELL_CONFIGS["detection"] = CellConfig(DETECTION_CONFIG, detection_cell_config, hash=DETECTION_HASH, rerun="detection")


rule detection_embedded:
    """The generated COCO/VOC-format default dataset (grids with `detection: {datasets: embedded}`)."""
    input:
        planned=PLANNED.input("detection_embedded", DETECTION_EMBEDDED),  # no file
    output:
        directory(DETECTION_EMBEDDED),
    log:
        DETECTION_EMBEDDED_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
    shell:
        logged("{params.python:q} -m ring.detection.embedded --out {output:q}")


rule detection_convert:
    """torchvision encoder -> Detectron2 .pkl, proven complete and numerically equal (ring.detection.convert)."""
    input:
        encoder=PRETRAIN_ENCODER,
        pretrain_hash=PRETRAIN_HASH,  # CONFIG_HASH in cells.smk
        planned=PLANNED.input("detection_convert", DETECTION_WEIGHTS),  # no file
        # STALE in common.smk: a backbone damaged since its conversion, or the mark a detection cell's
        # stale_evaluation puts on the backbone it trained on
        stale=stale_backbone,
    output:
        DETECTION_WEIGHTS,
    log:
        DETECTION_WEIGHTS_LOG,
    conda:
        RING_ENV
    threads: 1
    params:
        python=PYTHON,
    shell:
        "OMP_NUM_THREADS=1 {params.python:q} -m ring.detection.convert --encoder {input.encoder:q} --out {output:q} 2>&1 | tee {log:q}"


rule detection:
    input:
        cfg=ancient(DETECTION_CONFIG),  # CONFIG_HASH in cells.smk
        hash=DETECTION_HASH,
        weights=DETECTION_WEIGHTS,
        admitted=admitted("detection", output=DETECTION_METRICS),  # no file: the plan's SLURM check
        planned=PLANNED.input("detection", DETECTION_METRICS, launch_options("detection")),  # no file
        stale=stale_evaluation(DETECTION_METRICS),  # STALE in common.smk: the plan's stale mark, if any
        data=detection_data,
    output:
        DETECTION_METRICS,
    log:
        DETECTION_LOG,
    conda:
        RING_ENV
    threads: stage_threads("detection")
    params:
        python=PYTHON,
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("detection"),
    shell:
        "OMP_NUM_THREADS={threads} {params.python:q} -m ring.cluster.launch detection --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --weights {input.weights:q} --out {params.out:q} 2>&1 | tee {log:q}"
