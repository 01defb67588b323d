# Transfer's own helpers (Table 3), included by workflow/rules/transfer.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def transfer_encoders(wildcards) -> list:
    """The encoder files a transfer cell evaluates: the same method and seed pretrained on the grid's
    source (encoder.pt first; CMC's encoder_ab.pt is found beside it)."""
    source = GRIDS[wildcards.grid].transfer["source"]
    return expand(
        PRETRAIN_FILE,
        grid=wildcards.grid,
        dataset=source,
        method=wildcards.method,
        seed=wildcards.seed,
        name=METHODS[wildcards.method].encoder_files,
    )


def transfer_stage_config(wildcards):
    return GRIDS[wildcards.grid].transfer_config(
        wildcards.dataset,
        wildcards.method,
        int(wildcards.seed),
        config["data_root"],
        TRANSFER_STATS.format(**wildcards),
    )
