# Table 4's own helpers, included by workflow/rules/detection.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def detection_cell_config(wildcards):
    grid = GRIDS[wildcards.grid]
    return grid.detection_config(
        wildcards.method, wildcards.task, int(wildcards.seed), detection_datasets_root(wildcards.grid)
    )


def detection_data(wildcards) -> list:
    """The generated dataset when the grid uses it; real datasets are checked by the stage itself."""
    if GRIDS[wildcards.grid].detection.get("datasets") == "embedded":
        return [DETECTION_EMBEDDED.format(grid=wildcards.grid)]
    return []
