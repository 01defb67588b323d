# Tables: pandas aggregation of finished cells, beside the paper's published numbers.


rule make_table1:
    input:
        lambda wc: table_metrics(wc.grid, "table1"),
    output:
        expand(TABLE, table="table1", ext=TABLE_EXTS, allow_missing=True),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        methods=lambda wc: GRIDS[wc.grid].methods,
        datasets=lambda wc: GRIDS[wc.grid].datasets,
    localrule: True
    shell:
        "{PYTHON:q} -m ring.tables table1 --out {params.prefix:q} --methods {params.methods} "
        "--datasets {params.datasets} --metrics {input:q}"


rule make_gpu_hours:
    input:
        lambda wc: [*lincls_metrics(wc.grid), *transfer_metrics(wc.grid)],
    output:
        expand(TABLE, table="gpu_hours", ext=["csv", "md"], allow_missing=True),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        provenance=lambda wc, input: provenance_files(wc.grid),
    localrule: True
    shell:
        "{PYTHON:q} -m ring.tables gpu_hours --out {params.prefix:q} --provenance {params.provenance:q}"


rule make_grid_table:
    """Table 2 (lesions) and the LA-variants table: each from the cells of its `tables:` entry."""
    wildcard_constraints:
        table=_one_of(GRID_TABLES),
    input:
        lambda wc: table_metrics(wc.grid, wc.table),
    output:
        expand(TABLE, ext=TABLE_EXTS, allow_missing=True),
    params:
        prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
        methods=lambda wc: GRIDS[wc.grid].table_axes(wc.table)[0],
        datasets=lambda wc: GRIDS[wc.grid].table_axes(wc.table)[1],
    localrule: True
    shell:
        "{PYTHON:q} -m ring.tables {wildcards.table} --out {params.prefix:q} --methods {params.methods} "
        "--datasets {params.datasets} --metrics {input:q}"
