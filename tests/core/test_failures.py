"""ring.core.failures: the summary a failed Snakemake run ends with, one line per failed job."""

from ring.core import failures


def test_failed_run_summary_names_each_cell_and_its_sentence(tmp_path):
    log = tmp_path / "results" / "g" / "pretrain" / "cifar10" / "IRing" / "seed0" / "pretrain.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "epoch 1 ...\nring: The checkpoint x was written by method IR, but this cell trains IRing; move it.\n"
    )
    snakemake_log = (
        f"Error in rule pretrain:\n    message: None\n    jobid: 7\n"
        f"    output: results/g/pretrain/cifar10/IRing/seed0/encoder.pt\n"
        f"    log: {log} (check log file(s) for error details)\n    shell:\n        python -m ring.cluster.launch\n"
        "Error in rule lincls:\n    output: results/g/lincls/cifar10/IR/seed0/metrics.json\n"
        "Shutting down, this might take some time.\n"
    )
    assert failures.summary(snakemake_log) == (
        "ring: 2 jobs failed:\n"
        "  pretrain cifar10/IRing/seed0 (rule pretrain): The checkpoint x was written by method IR, but this cell "
        "trains IRing; "
        "move it.\n"
        "  lincls cifar10/IR/seed0 (rule lincls): see the job's output above"
    )


SNAKEMAKE_LOG = """Building DAG of jobs...
Error in rule pretrain:
    jobid: 3
    output: results/g/pretrain/digits/IR/seed0/encoder.pt, results/g/pretrain/digits/IR/seed0/export.json
    log: logs/a.log, logs/b.log (check log file(s) for error details)
    shell:
        python -m ring.cluster.launch pretrain
Removing output files of failed job pretrain since they might be corrupted:
    output: not/a/field/of/the/block
Error in rule all_tables:
    jobid: 0
"""


def test_failed_jobs_reads_each_error_block_and_stops_at_its_end():
    assert failures.failed_jobs(SNAKEMAKE_LOG) == [
        {
            "rule": "pretrain",
            "output": [
                "results/g/pretrain/digits/IR/seed0/encoder.pt",
                "results/g/pretrain/digits/IR/seed0/export.json",
            ],
            "log": ["logs/a.log", "logs/b.log"],  # Snakemake's "(check log file(s) ...)" is not a file
        },
        {"rule": "all_tables", "output": [], "log": []},
    ]
    assert failures.failed_jobs("Nothing to be done.\n") == []


def test_cell_of_names_a_results_file_by_its_stage_and_cell():
    assert failures.cell_of("results/g/lincls/cifar10/IRing/seed2/metrics.json") == "lincls cifar10/IRing/seed2"
    assert failures.cell_of("results/g/tables/table1.md") == "tables table1"  # no cell folder: the file's stem
    assert failures.cell_of("data/cifar10.ok") == "data/cifar10.ok"  # not under results/: as given


def test_reason_is_the_last_ring_sentence_of_the_first_log_that_has_one(tmp_path):
    quiet, loud, later = tmp_path / "quiet.log", tmp_path / "loud.log", tmp_path / "later.log"
    quiet.write_text("Traceback ...\nValueError: x\n")
    loud.write_text("ring: an earlier line\n  ring: indented, not a sentence of ours\nring: Dataset x is missing.\n")
    later.write_text("ring: never read\n")
    assert failures.reason([str(quiet), str(tmp_path / "absent.log"), str(loud), str(later)]) == "Dataset x is missing."
    assert failures.reason([str(quiet)]) == f"no one-sentence reason recorded; see {quiet}"
    assert failures.reason([]) == "see the job's output above"


def test_a_log_without_failed_jobs_has_no_summary():
    assert failures.summary("Finished job 0.\n1 of 1 steps (100%) done\n") == ""
    assert failures.summary("Error in rule x:\n").startswith("ring: 1 job failed:\n  x (rule x): ")


def test_the_run_summary_reads_the_logs_snakemake_passes(tmp_path):
    from ring.core import failures

    log = tmp_path / "snakemake.log"
    log.write_text("Error in rule lincls:\n    output: results/g/lincls/cifar10/IR/seed0/metrics.json\n")
    expected = "ring: 1 job failed:\n  lincls cifar10/IR/seed0 (rule lincls): see the job's output above"
    assert failures.run_summary(str(log)) == expected  # one path (Snakemake 8)
    assert failures.run_summary([str(tmp_path / "gone.log"), log]) == expected  # a list (Snakemake 9), one missing
    assert failures.run_summary([]) == ""
