# ring-bench: the benchmark suite of "Conditional Negative Sampling for Contrastive Learning of
# Visual Representations" (Wu et al., ICLR 2021) as a Snakemake workflow.
#
#   snakemake --profile profiles/local all_tables                 # the configured grid (smoke)
#   snakemake --profile profiles/local all_tables --config grid=paper
#   snakemake --profile profiles/local results/smoke/lincls/digits_colour/IRing/seed0/metrics.json
#
# This file is a table of contents: each stage lives in its rule file of workflow/rules/; common.smk holds what
# several stages share, functions.smk every function the rules call (the input functions in one place), cells.smk
# the config and hash rules every stage registers, run.smk the checks every run makes before its first job and its
# failure summary.  One namespace, in this order (docs/development.md, "The workflow's files").


# The default config is package data (ring/resources/): the one copy that an installed `ring` reads too.
configfile: "ring/resources/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/functions.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/lincls.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/toy_cnce.smk"
include: "workflow/rules/transfer.smk"
include: "workflow/rules/detection.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/run.smk"


rule all_tables:
    """Every table of the paper that the configured grid covers."""
    default_target: True
    input:
        all_tables(config["grid"]),


rule table1:
    """Table 1: linear evaluation of each method on each pretraining dataset."""
    input:
        table_files(config["grid"], "table1"),


rule table_toy_cnce:
    """The appendix's toy table: NCE and CNCE bounds on Gaussians of known mutual information."""
    input:
        toy_cnce_tables(config["grid"]),


rule table3:
    """Table 3: each method's source-pretrained encoder transferred to the grid's transfer datasets."""
    input:
        table_files(config["grid"], "table3"),


rule table4:
    """Table 4: frozen encoders as Detectron2 backbones (COCO det/seg/keypoints, VOC det)."""
    input:
        table_files(config["grid"], "table4"),


rule table2:
    """Table 2: the lesions (IRing without annealing, IRing with w_u = 100) beside IR and IRing."""
    input:
        table_files(config["grid"], "table2"),


rule table_la_variants:
    """The appendix's "Variants of Ring": LA, IRCave, CMCCave, IRing (+C_i), CMCRing (+C_i)."""
    input:
        table_files(config["grid"], "table_la_variants"),


rule fig_hard_negatives:
    """Appendix, hard negatives: IRing at fixed thresholds started from IR snapshots, 1-NN accuracy per epoch."""
    input:
        expand(FIGURE, grid=config["grid"], study="hard_negatives", ext=FIGURE_EXTS),


rule fig_anneal_policies:
    """Appendix, annealing policies: accuracy per epoch and the threshold over training, per policy."""
    input:
        expand(FIGURE, grid=config["grid"], study="anneal_policies", ext=FIGURE_EXTS),


rule fig_negatives_k:
    """Appendix, bias and variance: accuracy mean +- std over seeds versus the number of negatives k."""
    input:
        expand(FIGURE, grid=config["grid"], study="negatives_k", ext=FIGURE_EXTS),
        expand(TABLE, grid=config["grid"], table=STUDY_TABLES["negatives_k"], ext=["csv", "md"]),


rule fig_ring_window:
    """Appendix-style sweep of the final w_l (the window's upper percentile): accuracy per epoch, and its table."""
    input:
        expand(FIGURE, grid=config["grid"], study="ring_window", ext=FIGURE_EXTS),
        expand(TABLE, grid=config["grid"], table=STUDY_TABLES["ring_window"], ext=["csv", "md"]),


rule table_negatives_k:
    """The k sweep's table (accuracy mean +- std per method and k), fig_negatives_k's numbers."""
    input:
        expand(TABLE, grid=config["grid"], table=STUDY_TABLES["negatives_k"], ext=["csv", "md"]),


rule table_ring_window:
    """The final w_l sweep's table, fig_ring_window's numbers."""
    input:
        expand(TABLE, grid=config["grid"], table=STUDY_TABLES["ring_window"], ext=["csv", "md"]),


rule gpu_hours:
    """The GPU-hours of every cell that ran, from each cell's provenance.json."""
    input:
        expand(TABLE, grid=config["grid"], table="gpu_hours", ext=["csv", "md"]),


# Last, with every rule defined: each target asked for is a rule, or a file of a cell the grid names (ring.plan.targets).
# The documented `rules` names one rule at a time; the workflow's list of them is the only way to see them all.
RULE_WILDCARDS = {r.name: bool(r.wildcard_names) for r in workflow.rules}
if target_problem := ring.plan.targets.problem(
    ring.plan.targets.requested(sys.argv), RULE_WILDCARDS, GRID, Path("results"), Path.cwd()
):
    _fail_plan(target_problem)
