# Studies of the appendix: pretraining cells outside Table 1 (methods x variants x seeds of a grid's
# `studies` block), each run by the same ring.pretrain entry point, and the figures built from their logs.
# A variant with `init_from` starts from its source cell's snapshot, so the source cell is its input.


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
    shell:
        logged(
            "{params.python:q} -m ring.reports.figures table_negatives_k --out {params.prefix:q} --cells {params.cells:q}"
        )


rule make_table_ring_window:
    input:
        lambda wc: study_encoders(wc.grid, "ring_window"),
    output:
        table_outputs(STUDY_TABLES["ring_window"], ["csv", "md"]),
    log:
        expand(TABLE_LOG, table=STUDY_TABLES["ring_window"], allow_missing=True),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        cells=lambda wc, input: [cell_dir(f) for f in input],
        axes=lambda wc, input: cell_axes(input, STUDY_AXES),  # for the report caption
    shell:
        logged(
            "{params.python:q} -m ring.reports.figures table_ring_window --out {params.prefix:q} --cells {params.cells:q}"
        )
