# Studies of the appendix: pretraining cells outside Table 1 (methods x variants x seeds of a grid's
# `studies` block), each run by the same ring.pretrain entry point, and the figures built from their logs.
# A variant with `init_from` starts from its source cell's snapshot, so the source cell is its input.


include: "helpers/studies.smk"


from ring.core.config import SNAPSHOT_FILE

# Every study and variant name over all grids ("none" keeps a constraint valid without studies).
STUDY_NAMES = {name for g in GRIDS.values() for name in g.studies} or {"none"}
VARIANT_NAMES = {v for g in GRIDS.values() for s in g.studies.values() for v in s.variants} or {"none"}


wildcard_constraints:
    study=_one_of(STUDY_NAMES),
    variant=_one_of(VARIANT_NAMES),


STUDY_CONFIG = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/config.yaml"
STUDY_CONFIG_LOG = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/config.log"
STUDY_ENCODER = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/encoder.pt"
STUDY_LOG = "results/{grid}/study/{study}/{dataset}/{method}/{variant}/seed{seed}/pretrain.log"
# The folder levels of STUDY_ENCODER from the last up, for cell_axes (the report captions).
STUDY_AXES = ("seed", "variant", "method", "dataset")
FIGURE = "results/{grid}/tables/fig_{study}.{ext}"
FIGURE_LOG = "results/{grid}/tables/fig_{study}.log"
FIGURE_EXTS = ["png", "pdf", "csv"]
# Studies that also write a summary table (name -> table): the k sweep's mean +- std over seeds.
STUDY_TABLES = {"negatives_k": "table_negatives_k", "ring_window": "table_ring_window"}


rule study_config:
    output:
        STUDY_CONFIG,
    log:
        STUDY_CONFIG_LOG,
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        text=lambda wc: config_text(study_cell_config(wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    shell:
        write_cell_config("pretrain")


rule study_pretrain:
    input:
        cfg=STUDY_CONFIG,
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
        store=ancient(cell_store_ok(study_cell_config)),  # the prepared store it reads (prepare.smk), if any
        source=study_source,
    output:
        STUDY_ENCODER,
    log:
        STUDY_LOG,
    conda:
        RING_ENV
    threads: stage_threads("study")
    params:
        python=PYTHON,
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("pretrain"),
    shell:
        "OMP_NUM_THREADS={threads} {params.python:q} -m ring.cluster.launch pretrain --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --out {params.out:q} 2>&1 | tee {log:q}"


# One rule per study (its figure's own report caption): the curves of the study's cells.
for figure_study in STUDY_NAMES - {"none"}:

    rule:
        name:
            f"make_fig_{figure_study}"
        input:
            lambda wc, study=figure_study: study_encoders(wc.grid, study),
        output:
            for_report(
                expand(FIGURE, study=figure_study, ext=FIGURE_EXTS, allow_missing=True),
                f"fig_{figure_study}",
                "Figures",
            ),
        log:
            expand(FIGURE_LOG, study=figure_study, allow_missing=True),
        localrule: True
        conda:
            RING_ENV
        params:
            python=PYTHON,
            study=figure_study,
            prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
            cells=lambda wc, input: [cell_dir(f) for f in input],
            axes=lambda wc, input: cell_axes(input, STUDY_AXES),  # for the report caption
        shell:
            logged(
                "{params.python:q} -m ring.reports.figures {params.study} --out {params.prefix:q} --cells {params.cells:q}"
            )


# The studies' tables: one rule, the k sweep's; each other study's table uses it with its own files.
rule make_table_negatives_k:
    input:
        lambda wc: study_encoders(wc.grid, "negatives_k"),
    output:
        table_outputs(STUDY_TABLES["negatives_k"], ["csv", "md"]),
    log:
        expand(TABLE_LOG, table=STUDY_TABLES["negatives_k"], allow_missing=True),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        cells=lambda wc, input: [cell_dir(f) for f in input],
        axes=lambda wc, input: cell_axes(input, STUDY_AXES),  # for the report caption
        table=lambda wc, output: Path(output[0]).stem,  # ring.reports.figures's builder of that name
    shell:
        logged(
            "{params.python:q} -m ring.reports.figures {params.table} --out {params.prefix:q} --cells {params.cells:q}"
        )


use rule make_table_negatives_k as make_table_ring_window with:
    input:
        lambda wc: study_encoders(wc.grid, "ring_window"),
    output:
        table_outputs(STUDY_TABLES["ring_window"], ["csv", "md"]),
    log:
        expand(TABLE_LOG, table=STUDY_TABLES["ring_window"], allow_missing=True),
