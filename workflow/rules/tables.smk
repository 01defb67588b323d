# Tables: pandas aggregation of finished cells, beside the paper's published numbers, and which tables and
# figures a grid builds (all_tables, the Snakefile's default target).

# The provenance of every cell beside its outputs, read by the GPU-hours table.
PRETRAIN_PROVENANCE = "results/{grid}/pretrain/{dataset}/{method}/seed{seed}/provenance.json"
LINCLS_PROVENANCE = "results/{grid}/lincls/{dataset}/{method}/seed{seed}/provenance.json"
# Tables with their own cells (the grid's `tables:` block), built by rules make_<table>.
GRID_TABLES = ["table2", "table_la_variants"]


def cell_wildcards(grid: str) -> dict:
    """Parallel lists of dataset, method and seed over the cells of ``grid``, for expand(zip)."""
    cells = GRIDS[grid].cells()
    return {"dataset": [c[0] for c in cells], "method": [c[1] for c in cells], "seed": [c[2] for c in cells]}


def lincls_metrics(grid: str) -> list:
    return expand(LINCLS_METRICS, zip, grid=[grid] * len(GRIDS[grid].cells()), **cell_wildcards(grid))


def provenance_files(grid: str) -> list:
    """Provenance of every finished cell of ``grid`` (read after the cells, never an input)."""
    n = len(GRIDS[grid].cells())
    paths = [
        *expand(PRETRAIN_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
        *expand(LINCLS_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
        *[str(Path(p).with_name("provenance.json")) for p in transfer_metrics(grid)],
    ]
    return [p for p in paths if Path(p).exists()]


def table_metrics(grid: str, table: str) -> list:
    """metrics.json of the cells of one table of ``grid`` (Table 1: the top-level datasets x methods)."""
    cells = GRIDS[grid].table_cells(table)
    return [LINCLS_METRICS.format(grid=grid, dataset=d, method=m, seed=s) for d, m, s in cells]


def table_files(grid: str, table: str) -> list:
    return expand(TABLE, grid=grid, table=table, ext=TABLE_EXTS)


def toy_cnce_tables(grid: str) -> list:
    """The appendix's toy table where the grid has a toy_cnce block."""
    return table_files(grid, "table_toy_cnce") if GRIDS[grid].toy_cnce_seeds() else []


def study_files(grid: str) -> list:
    """Figures (and tables) of every study the grid plans (their rules: studies.smk)."""
    files = []
    for study in GRIDS[grid].studies:
        files += expand(FIGURE, grid=grid, study=study, ext=FIGURE_EXTS)
        if study in STUDY_TABLES:
            files += expand(TABLE, grid=grid, table=STUDY_TABLES[study], ext=["csv", "md"])
    return files


def all_tables(grid: str) -> list:
    """Every table and figure the grid covers: Table 1, then each optional block's, then GPU-hours."""
    g = GRIDS[grid]
    return [
        *table_files(grid, "table1"),
        *[f for table in g.tables for f in table_files(grid, table)],  # Table 2, the LA variants
        *(table_files(grid, "table3") if g.transfer else []),
        *(table_files(grid, "table4") if g.detection else []),
        *toy_cnce_tables(grid),
        *study_files(grid),
        *expand(TABLE, grid=grid, table="gpu_hours", ext=["csv", "md"]),
    ]


onsuccess:
    # Print the tables this run was asked for, so `all_tables` ends with them on screen.
    for target in (Path(f) for f in all_tables(config["grid"]) if f.endswith(".md")):
        if target.exists():
            print(f"\n{target}\n\n{target.read_text()}", file=sys.stderr)


rule make_table1:
    input:
        lambda wc: table_metrics(wc.grid, "table1"),
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
    shell:
        logged(
            "{params.python:q} -m ring.reports.tables gpu_hours --out {params.prefix:q} --provenance {params.provenance:q}"
        )


# Table 2 (lesions) and the LA-variants table: each from the cells of its `tables:` entry; one
# rule per table, so that each has its own report caption.
for grid_table in GRID_TABLES:

    rule:
        name:
            f"make_{grid_table}"
        input:
            lambda wc, table=grid_table: table_metrics(wc.grid, table),
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
