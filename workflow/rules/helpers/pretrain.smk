# Pretraining's own helpers, included by workflow/rules/pretrain.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def two_encoder_methods() -> list:
    """Methods whose pretraining cells export an L and an ab trunk (CMC and its variants)."""
    return [name for name, m in METHODS.items() if len(m.encoder_files) > 1]


def stale_encoder(wildcards) -> list:
    """A pretraining rule's ``stale`` input: marks the cell's encoder (STALE in common.smk) when another config than the
    grid's made it, or when its files differ from their checksum record (damaged after the cell finished)."""
    encoder = Path(PRETRAIN_ENCODER.format(**dict(wildcards.items())))
    if not encoder.is_file():  # nothing to be stale (and no config to build: plans stay fast)
        return stale_input(None, [str(encoder)])
    found = ring.plan.lineage.superseded(
        encoder.parent, config_hash(stage_config("pretrain", wildcards))
    ) or ring.plan.lineage.damaged(encoder.parent, METHODS[wildcards.method].encoder_files, encoder)
    return stale_input(found.target if found else None, [str(encoder)])
