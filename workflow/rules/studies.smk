# Studies of the appendix: pretraining cells outside Table 1 (methods x variants x seeds of a grid's
# `studies` block), each run by the same ring.pretrain entry point, and the figures built from their logs.
# A variant with `init_from` starts from its source cell's snapshot, so the source cell is its input.


from ring.core.config import SNAPSHOT_FILE
from ring.core.stages import STAGES

# Every study and variant name over all grids ("none" keeps a constraint valid without studies).
STUDY_NAMES = {name for g in GRIDS.values() for name in g.studies} or {"none"}
VARIANT_NAMES = {v for g in GRIDS.values() for s in g.studies.values() for v in s.variants} or {"none"}


wildcard_constraints:
    study=one_of(STUDY_NAMES),
    variant=one_of(VARIANT_NAMES),


STUDY_CONFIG = cell_file("study", "config.yaml")
STUDY_ENCODER = cell_file("study", "encoder.pt")
STUDY_LOG = cell_file("study", "pretrain.log")
# The folder levels of STUDY_ENCODER from the last up, for cell_axes (the report captions), but the study's (one
# figure each).
STUDY_AXES = tuple(reversed(STAGES["study"].cell))[:-1]
FIGURE = "results/{grid}/tables/fig_{study}.{ext}"
FIGURE_EXTS = ["png", "pdf", "csv"]
# Studies that also write a summary table (name -> table): the k sweep's mean +- std over seeds.
STUDY_TABLES = {"negatives_k": "table_negatives_k", "ring_window": "table_ring_window"}
# A study cell is a pretraining cell: its config.yaml brings a finished cell in line as pretrain_config's does.
CELL_CONFIGS["study"] = CellConfig(STUDY_CONFIG, study_cell_config, rerun="pretrain")


# A study cell trains as a Table 1 cell does: the pretrain rule's job, on its study's config.
use rule pretrain as study_pretrain with:
    input:
        cfg=STUDY_CONFIG,
        data=ancient(DATA_OK),  # a rerun data check (the dataset changed) never retrains a finished cell
        store=ancient(cell_store_ok(study_cell_config)),  # the prepared store it reads (prepare.smk), if any
        source=study_source,
        admitted=admitted("pretrain", study_cell_config, STUDY_ENCODER),  # no file: the plan's SLURM check
        planned=PLANNED.input("study_pretrain", STUDY_ENCODER, launch_options("pretrain")),  # no file
    output:
        STUDY_ENCODER,
    log:
        STUDY_LOG,
    wildcard_constraints:
        method=one_of(METHODS),
    threads: stage_threads("study")


# Each study's figure, and the summary table of a study that has one: one rule make_<name> each (for its own report
# caption).  name -> (the study, the ring.reports.figures builder that makes it from the curves of the study's cells:
# the study's for its figure, the table's for its table, its files).
STUDY_REPORTS = {
    **{
        f"fig_{s}": (
            s,
            s,
            for_report(expand(FIGURE, study=s, ext=FIGURE_EXTS, allow_missing=True), f"fig_{s}", "Figures"),
        )
        for s in sorted(STUDY_NAMES - {"none"})
    },
    **{table: (s, table, table_outputs(table, ["csv", "md"])) for s, table in STUDY_TABLES.items()},
}


for report_name, (report_study, report_builder, report_outputs) in STUDY_REPORTS.items():

    rule:
        name:
            f"make_{report_name}"
        input:
            lambda wc, study=report_study: study_encoders(wc.grid, study),
        output:
            report_outputs,
        log:
            expand(TABLE_LOG, table=report_name, allow_missing=True),
        localrule: True
        conda:
            RING_ENV
        params:
            python=PYTHON,
            prefix=lambda wc, output: str(Path(output[0]).with_suffix("")),
            cells=lambda wc, input: [cell_dir(f) for f in input],
            axes=lambda wc, input: cell_axes(input, STUDY_AXES),  # for the report caption
            shown=lambda wc, output: shown_table(Path(output[0]).with_suffix(".md")),
        shell:
            own_shell(
                locals(),
                f"make_{report_name}",
                logged(
                    f"{{params.python:q}} -m ring.reports.figures {report_builder} --out {{params.prefix:q}} "
                    "--cells {params.cells:q}"
                ),
            )
