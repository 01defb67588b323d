# The data check's own helpers, included by workflow/rules/data.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def generated_data(wildcards) -> list:
    """The generation marker of an embedded generated dataset, which its data check waits for."""
    return [GENERATED_DATA.format(dataset=wildcards.dataset)] if wildcards.dataset in GENERATORS else []
