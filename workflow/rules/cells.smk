# The light rules of every stage's cells: <stage>_config writes a cell's config.yaml and <stage>_hash its config.hash,
# one rule pair for every stage that registered itself in CELL_CONFIGS (common.smk; ring.plan.rules.CellConfig).
# Included last: every stage's paths and config builders are defined by then.
#
# CONFIG_HASH: a stage's cell has two light rules. <stage>_hash writes config.hash, the hash of the values that
# change results (ring.core.config.config_hash), and reruns only when it changes; <stage>_config, after it, writes
# config.yaml, every value the job reads (runtime knobs such as threads, compile and num_workers included), and
# reruns on any edit.  The stage rule takes config.hash as a plain input and config.yaml as ancient(), so a
# runtime-only edit rewrites config.yaml and submits nothing, while any other edit reruns exactly the cells it
# changes.  A rule that reads an encoder takes its pretraining cell's config.hash too, as an edited pretraining config
# whose job failed removed the encoder, a missing intermediate that alone would not rerun the evaluation (the next
# run would report "Nothing to be done").  In this order, not the other: Snakemake never looks at the params of a
# job that follows one it reruns, so a hash rule after config.yaml's would miss every edit.
# Studies and the toy have no hash rule: their stage rules take config.yaml as a plain input.

from ring.plan.rules import WRITE_HASH

for cell_stage, stage_cells in CELL_CONFIGS.items():

    rule:
        name:
            f"{cell_stage}_config"
        input:
            [stage_cells.hash] if stage_cells.hash else [],  # CONFIG_HASH: its rule runs first
        output:
            stage_cells.config,
        log:
            stage_cells.config_log,
        localrule: True
        conda:
            RING_ENV
        params:
            python=PYTHON,
            text=lambda wc, build=stage_cells.build: config_text(build(wc)),
            cell=lambda wc, output: cell_dir(output[0]),
        shell:
            own_shell(locals(), f"{cell_stage}_config", stage_cells.command)


for cell_stage, stage_cells in ((s, c) for s, c in CELL_CONFIGS.items() if c.hash):

    rule:
        name:
            f"{cell_stage}_hash"
        output:
            stage_cells.hash,
        log:
            stage_cells.hash_log,
        localrule: True
        conda:
            RING_ENV
        params:
            results=lambda wc, build=stage_cells.build: config_hash(build(wc)),
        shell:
            WRITE_HASH
