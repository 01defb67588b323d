# The toy CNCE experiment's own helpers, included by workflow/rules/toy_cnce.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def toy_cnce_metrics(grid: str) -> list:
    return expand(TOY_CNCE_METRICS, grid=grid, seed=GRIDS[grid].toy_cnce_seeds())
