# The prepare stage's own helpers, included by workflow/rules/prepare.smk: functions only,
# as `snakemake --lint` wants them apart from the rules.


def store_shards(wildcards) -> list:
    """Every shard record of a store: the catalog's image counts make the shards, so the plan needs no listing."""
    counts = dict(zip(STORE_SPLITS, DATASETS[wildcards.dataset].publisher_counts))
    return [
        STORE_SHARD.format(**dict(wildcards.items()), split=split, shard=f"{shard:05d}")
        for split, images in counts.items()
        for shard in range(n_shards(images))
    ]


def cell_store_ok(config_of):
    """A stage rule's ``store`` input: the check stamp of the prepared store its cell reads (ring.data.store_layout.cell_store:
    an image folder at the catalog's store size, store not none), else nothing.  ``config_of``: the cell's config from
    the rule's wildcards."""

    def store_ok(wildcards) -> list:
        cfg = config_of(wildcards)
        spec = DATASETS.get(cfg.dataset)
        if cell_store(".", spec.store_size if spec else 0, cfg.store, cfg.resize) is None:
            return []
        return [STORE_OK.format(grid=wildcards.grid, dataset=cfg.dataset, format=cfg.store, size=cfg.resize)]

    return store_ok


def grid_store_oks(grid: str) -> list:
    """The check stamps of every store the grid's pretraining and linear-evaluation cells read."""
    return sorted(
        {
            ok
            for dataset, method, seed in GRIDS[grid].cells()
            for stage in ("pretrain", "lincls")
            for ok in cell_store_ok(lambda wc, stage=stage: stage_config(stage, wc))(
                SimpleNamespace(grid=grid, dataset=dataset, method=method, seed=str(seed))
            )
        }
    )


def store_changed(wildcards) -> list:
    """store_check's ``changed`` input: the check's stale mark (STALE in common.smk) when the store's manifest
    and shards are no longer what the check's stamp records (a few stats, ring.data.store_layout.fingerprint): a store
    deleted is then built again and checked, a damaged one stops the run, where the stamp alone said "Nothing to be
    done".  A params trigger cannot: its value is taken as the run is planned, before the store is built again."""
    ok = STORE_OK.format(**dict(wildcards.items()))
    stamp = read_record(ok)
    where = STORE.format(dataset=wildcards.dataset, format=wildcards.format, size=wildcards.size)
    here = store_fingerprint(Path(where))
    return stale_input(ok if stamp and stamp.get("fingerprint") != here else None, [ok])
