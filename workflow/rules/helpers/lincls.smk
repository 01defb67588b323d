# The linear evaluation's own helpers, included by workflow/rules/lincls.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def encoder_companions(wildcards) -> list:
    """Encoder files of a pretraining cell besides encoder.pt (CMC's encoder_ab.pt)."""
    return expand(PRETRAIN_FILE, name=METHODS[wildcards.method].encoder_files[1:], **wildcards)
