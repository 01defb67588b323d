# ring-bench: the benchmark suite of "Conditional Negative Sampling for Contrastive Learning of
# Visual Representations" (Wu et al., ICLR 2021) as a Snakemake workflow.
#
#   snakemake --profile profiles/local all_tables                 # the configured grid (smoke)
#   snakemake --profile profiles/local all_tables --config grid=paper
#   snakemake --profile profiles/local results/smoke/lincls/digits/IRing/seed0/metrics.json
#
# This file is a table of contents: stages live in workflow/rules/, helpers in common.smk.

configfile: "workflow/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/lincls.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/studies.smk"


rule all_tables:
    """Every table of the paper that the configured grid covers."""
    input:
        all_tables(config["grid"]),
    default_target: True


rule table1:
    """Table 1: linear evaluation of each method on each pretraining dataset."""
    input:
        table_files(config["grid"], "table1"),


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
