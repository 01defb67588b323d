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


def stale_backbone(wildcards) -> list:
    """The conversion rule's ``stale`` input: marks the converted backbone when its bytes are not those its
    checksum record holds (damaged after its conversion), or it has none; then the marks on it (this one, or one
    a detection cell's stale_evaluation set)."""
    weights = DETECTION_WEIGHTS.format(**dict(wildcards.items()))
    found = ring.plan.lineage.backbone_damage(Path(weights))
    return stale_input(found.target if found else None, [weights])
