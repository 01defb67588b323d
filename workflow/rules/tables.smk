# Tables: pandas aggregation of finished cells, beside the paper's published numbers.


rule make_table1:
    input:
        lambda wc: lincls_metrics(wc.grid),
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
