# The tables' own helpers (and which tables and figures a grid builds: all_tables), included by
# workflow/rules/tables.smk: functions only, as `snakemake --lint` wants them apart from the rules.

from ring.reports.captions import outlook as table_outlook  # what the gpu_hours table says of its grid's end


def cell_wildcards(grid: str) -> dict:
    """Parallel lists of dataset, method and seed over the cells of ``grid``, for expand(zip)."""
    cells = GRIDS[grid].cells()
    return {"dataset": [c[0] for c in cells], "method": [c[1] for c in cells], "seed": [c[2] for c in cells]}


def transfer_metrics(grid: str) -> list:
    cells = GRIDS[grid].transfer_cells()
    return [TRANSFER_METRICS.format(grid=grid, dataset=d, method=m, seed=s) for d, m, s in cells]


def detection_metrics(grid: str) -> list:
    cells = GRIDS[grid].detection_cells()
    return [DETECTION_METRICS.format(grid=grid, dataset=d, method=m, task=t, seed=s) for d, m, t, s in cells]


def toy_cnce_metrics(grid: str) -> list:
    return expand(TOY_CNCE_METRICS, grid=grid, seed=GRIDS[grid].toy_cnce_seeds())


def lincls_metrics(grid: str) -> list:
    return expand(LINCLS_METRICS, zip, grid=[grid] * len(GRIDS[grid].cells()), **cell_wildcards(grid))


def provenance_files(grid: str) -> list:
    """Provenance of every finished cell of ``grid`` and of every run an edit set aside in it, read after the cells,
    never an input."""
    n = len(GRIDS[grid].cells())
    return with_kept_runs(
        [
            *expand(PRETRAIN_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
            *expand(LINCLS_PROVENANCE, zip, grid=[grid] * n, **cell_wildcards(grid)),
            *[str(Path(p).with_name("provenance.json")) for p in transfer_metrics(grid)],
        ]
    )


def table_metrics(grid: str, table: str) -> list:
    """metrics.json of the cells of one table of ``grid`` (Table 1: the top-level datasets x methods)."""
    cells = GRIDS[grid].table_cells(table)
    return [LINCLS_METRICS.format(grid=grid, dataset=d, method=m, seed=s) for d, m, s in cells]


def lincls_table(table: str, **params) -> TableRule:
    """A table of linear-evaluation cells (Table 1, a `tables:` entry): rows its methods, columns its datasets."""
    return TableRule(
        lambda grid: table_metrics(grid, table),
        AXES_OPTIONS,
        {
            "methods": lambda wc: GRIDS[wc.grid].table_axes(table)[0],
            "datasets": lambda wc: GRIDS[wc.grid].table_axes(table)[1],
            **params,
        },
    )


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


def missing_cells(table: str, cells):
    """A table rule's ``stale`` input: marks the table (STALE in common.smk) when a file of a cell it averages
    (``cells(grid)``) is gone (a metrics.json deleted, a pruned seed named again).  Snakemake reruns nothing for a
    missing intermediate file while the table is there and newer (it said "Nothing to be done" beside a table that
    still averaged the gone cell); rerun, the table needs its inputs, and the cells that make them are planned
    (restored from their kept copies, or rerun).  The table's command and caption read its ``cells`` input alone."""

    def marks(wc) -> list:
        table_file = TABLE.format(grid=wc.grid, table=table, ext="csv")
        return stale_input(stale_table(table_file, cells(wc.grid)), [table_file])

    return marks
