# Tables: pandas aggregation of finished cells, beside the paper's published numbers, and which tables and
# figures a grid builds (all_tables, the Snakefile's default target).


from ring.plan.rules import TableRule

# The provenance of every cell beside its outputs, read by the GPU-hours table.
PRETRAIN_PROVENANCE = cell_file("pretrain", "provenance.json")
LINCLS_PROVENANCE = cell_file("lincls", "provenance.json")
# Tables with their own cells (the grid's `tables:` block).
GRID_TABLES = ["table2", "table_la_variants"]


onsuccess:
    # Print the tables this run was asked for, so `all_tables` ends with them on screen.
    for target in (Path(f) for f in all_tables(config["grid"]) if f.endswith(".md")):
        if target.exists():
            print(f"\n{target}\n\n{target.read_text()}", file=sys.stderr)


# The options of a table whose rows are methods and its columns datasets (Tables 1, 2 and 3, the LA variants).
AXES_OPTIONS = "--methods {params.methods} --datasets {params.datasets} --metrics {input.cells:q}"
# Every table of ring.reports.tables and its rule make_<table> (one each, for its own report caption): the files of
# the grid's cells it reads, its command's options and the params they and its caption name (ring.plan.rules).
TABLE_RULES = {
    "table1": lincls_table("table1", features=lambda wc, input: feature_maps(input.cells)),  # the caption's features
    **{table: lincls_table(table) for table in GRID_TABLES},
    "table3": TableRule(
        transfer_metrics,
        AXES_OPTIONS,
        {
            "methods": lambda wc: GRIDS[wc.grid].transfer_methods(),
            "datasets": lambda wc: GRIDS[wc.grid].transfer["datasets"],
            # For the report caption: the source column whose encoders the cells read, and their features.
            "source": lambda wc, input: cell_config(input.cells).get("source", ""),
            "features": lambda wc, input: feature_maps(input.cells),
        },
    ),
    "table4": TableRule(
        detection_metrics,
        "--methods {params.methods} --metrics {input.cells:q}",
        {
            "methods": lambda wc: GRIDS[wc.grid].detection["methods"],
            # For the report caption: the source, methods and tasks of the cells, and their datasets.
            "cells": lambda wc, input: cell_axes(input.cells, ("seed", "task", "method", "source")),
            "datasets": lambda wc, input: cell_config(input.cells).get("datasets", ""),
        },
    ),
    "table_toy_cnce": TableRule(
        toy_cnce_metrics,
        "--metrics {input.cells:q}",
        {
            # For the report caption: the cells' protocol and the mutual information they estimate.
            "toy": lambda wc, input: cell_config(input.cells),
            "true_mi": lambda wc, input: next(
                (m["true_mi"] for m in cell_metrics(input.cells) if "true_mi" in m), None
            ),
        },
    ),
    "gpu_hours": TableRule(
        lambda grid: [*lincls_metrics(grid), *transfer_metrics(grid)],
        "--provenance {params.provenance:q} --outlook -",  # each cell's provenance.json, beside the metrics it waits for
        {
            "provenance": lambda wc, input: provenance_files(wc.grid),
            "grid": GRID_FILE,
            "outlook": lambda wc, output: table_outlook(Path(output[0]).with_suffix(".md")),  # for the report caption
        },
        exts=("csv", "md"),
        # The table opens with when this grid will end, as `ring status --grid` says it (its JSON, piped in).
        feed="{params.python:q} -m ring.cluster.outlook --grid {params.grid:q}",
    ),
}


for table_name, table_rule in TABLE_RULES.items():

    rule:
        name:
            f"make_{table_name}"
        input:
            cells=lambda wc, cells=table_rule.cells: cells(wc.grid),  # what the command and the caption read
            stale=missing_cells(table_name, table_rule.cells),  # the table's stale mark (functions.smk)
        output:
            table_outputs(table_name, table_rule.exts),
        log:
            expand(TABLE_LOG, table=table_name, allow_missing=True),
        localrule: True
        conda:
            RING_ENV
        params:
            **table_rule.params,
            python=PYTHON,
            prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
            # For the report caption: the table as its .md prints it, marks beside the numbers.
            shown=lambda wc, output: shown_table(Path(output[0]).with_suffix(".md")),
        shell:
            own_shell(locals(), f"make_{table_name}", table_rule.command(table_name))
