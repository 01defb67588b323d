# Studies of the appendix: pretraining cells outside Table 1 (methods x variants x seeds of a grid's
# `studies` block), each run by the same ring.pretrain entry point, and the figures built from their logs.
# A variant with `init_from` starts from its source cell's snapshot, so the source cell is its input.


rule study_config:
    output:
        STUDY_CELL + "/config.yaml",
    params:
        text=lambda wc: config_text(study_cell_config(wc)),
        cell=lambda wc, output: cell_dir(output[0]),
    localrule: True
    shell:
        write_cell_config("pretrain")


rule study_pretrain:
    input:
        cfg=STUDY_CELL + "/config.yaml",
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
        source=study_source,
    output:
        STUDY_CELL + "/encoder.pt",
    log:
        STUDY_CELL + "/pretrain.log",
    params:
        out=lambda wc, output: cell_dir(output[0]),
        launch=launch_options("pretrain"),
    threads: stage_threads("study")
    shell:
        "OMP_NUM_THREADS={threads} {PYTHON:q} -m ring.launch pretrain --cell {params.out:q} {params.launch}"
        " -- --config {input.cfg:q} --out {params.out:q} 2>&1 | tee {log:q}"


# One rule per study (its figure's own report caption): the curves of the study's cells.
for figure_study in STUDY_NAMES - {"none"}:

    rule:
        name:
            f"make_fig_{figure_study}"
        input:
            lambda wc, study=figure_study: study_encoders(wc.grid, study),
        output:
            for_report(expand(FIGURE, study=figure_study, ext=FIGURE_EXTS, allow_missing=True),
                       f"fig_{figure_study}", "Figures"),
        params:
            study=figure_study,
            prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
            cells=lambda wc, input: [cell_dir(f) for f in input],
        localrule: True
        shell:
            "{PYTHON:q} -m ring.figures {params.study} --out {params.prefix:q} --cells {params.cells:q}"


rule make_table_negatives_k:
    input:
        lambda wc: study_encoders(wc.grid, "negatives_k"),
    output:
        table_outputs(STUDY_TABLES["negatives_k"], ["csv", "md"]),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        cells=lambda wc, input: [cell_dir(f) for f in input],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.figures table_negatives_k --out {params.prefix:q} --cells {params.cells:q}"


rule make_table_ring_window:
    input:
        lambda wc: study_encoders(wc.grid, "ring_window"),
    output:
        table_outputs(STUDY_TABLES["ring_window"], ["csv", "md"]),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        cells=lambda wc, input: [cell_dir(f) for f in input],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.figures table_ring_window --out {params.prefix:q} --cells {params.cells:q}"
