# Tables: pandas aggregation of finished cells, beside the paper's published numbers, and which tables and
# figures a grid builds (all_tables, the Snakefile's default target).


include: "helpers/tables.smk"


# The provenance of every cell beside its outputs, read by the GPU-hours table.
PRETRAIN_PROVENANCE = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/provenance.json"
LINCLS_PROVENANCE = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/provenance.json"
# Tables with their own cells (the grid's `tables:` block), built by rules make_<table>.
GRID_TABLES = ["table2", "table_la_variants"]


onsuccess:
    # Print the tables this run was asked for, so `all_tables` ends with them on screen.
    for target in (Path(f) for f in all_tables(config["grid"]) if f.endswith(".md")):
        if target.exists():
            print(f"\n{target}\n\n{target.read_text()}", file=sys.stderr)


rule make_table1:
    input:
        lambda wc: table_metrics(wc.grid, "table1"),
        stale=missing_cells("table1"),  # STALE in common.smk: no file, a forced rerun
    output:
        table_outputs("table1"),
    log:
        expand(TABLE_LOG, table="table1", allow_missing=True),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        methods=lambda wc: GRIDS[wc.grid].methods,
        datasets=lambda wc: GRIDS[wc.grid].datasets,
        features=lambda wc, input: feature_maps(input),  # for the report caption
    shell:
        logged(
            "{params.python:q} -m ring.reports.tables table1 --out {params.prefix:q} --methods {params.methods} "
            "--datasets {params.datasets} --metrics {input:q}"
        )


rule make_gpu_hours:
    input:
        lambda wc: [*lincls_metrics(wc.grid), *transfer_metrics(wc.grid)],
        stale=missing_cells("gpu_hours"),
    output:
        table_outputs("gpu_hours", ["csv", "md"]),
    log:
        expand(TABLE_LOG, table="gpu_hours", allow_missing=True),
    localrule: True
    conda:
        RING_ENV
    params:
        python=PYTHON,
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        provenance=lambda wc, input: provenance_files(wc.grid),
        grid=GRID_FILE,  # the table opens with when this grid will end, as `ring status --grid` says (JSON piped in)
        outlook=lambda wc, output: table_outlook(Path(output[0]).with_suffix(".md")),  # for the report caption
    shell:
        logged(
            "{params.python:q} -m ring.cluster.outlook --grid {params.grid:q} | "
            "{params.python:q} -m ring.reports.tables gpu_hours --out {params.prefix:q} --provenance {params.provenance:q} "
            "--outlook -"
        )


# Table 2 (lesions) and the LA-variants table: each from the cells of its `tables:` entry; one
# rule per table, so that each has its own report caption.
for grid_table in GRID_TABLES:

    rule:
        name:
            f"make_{grid_table}"
        input:
            lambda wc, table=grid_table: table_metrics(wc.grid, table),
            stale=missing_cells(grid_table),
        output:
            table_outputs(grid_table),
        log:
            expand(TABLE_LOG, table=grid_table, allow_missing=True),
        localrule: True
        conda:
            RING_ENV
        params:
            python=PYTHON,
            table=grid_table,
            prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
            methods=lambda wc, table=grid_table: GRIDS[wc.grid].table_axes(table)[0],
            datasets=lambda wc, table=grid_table: GRIDS[wc.grid].table_axes(table)[1],
        shell:
            logged(
                "{params.python:q} -m ring.reports.tables {params.table} --out {params.prefix:q} --methods {params.methods} "
                "--datasets {params.datasets} --metrics {input:q}"
            )
