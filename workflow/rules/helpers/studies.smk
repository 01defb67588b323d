# The appendix studies' own helpers, included by workflow/rules/studies.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def study_encoders(grid: str, study: str) -> list:
    """encoder.pt of every cell of a study (the figure reads log.jsonl and config.yaml beside each)."""
    if study not in GRIDS[grid].studies:
        raise ValueError(f"Grid {grid} plans no study {study!r}; add it under studies: in {GRIDS[grid].file}.")
    s = GRIDS[grid].studies[study]
    return [
        STUDY_ENCODER.format(grid=grid, study=study, dataset=s.dataset, method=m, variant=v, seed=seed)
        for m, v, seed in s.cells()
    ]


def study_source(wildcards) -> list:
    """The cell a study cell starts from (its snapshot is read after the source finishes), or nothing."""
    ref = GRIDS[wildcards.grid].studies[wildcards.study].init_source(wildcards.variant)
    if ref is None:
        return []
    return [
        STUDY_ENCODER.format(
            grid=wildcards.grid,
            study=wildcards.study,
            dataset=wildcards.dataset,
            method=ref["method"],
            variant=ref["variant"],
            seed=wildcards.seed,
        )
    ]


def study_cell_config(wildcards):
    grid, study = GRIDS[wildcards.grid], wildcards.study
    ref = grid.studies[study].init_source(wildcards.variant)
    init = (
        "" if ref is None else str(Path(study_source(wildcards)[0]).parent / SNAPSHOT_FILE.format(epoch=ref["epoch"]))
    )
    return grid.study_config(study, wildcards.method, wildcards.variant, int(wildcards.seed), config["data_root"], init)
