import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake.utils import format as snakemake_format

from ring.plan import rules
from ring.plan.rules import CellConfig, TableRule, one_of, stale_table, with_kept_runs


def test_one_of_matches_each_name_whole_and_nothing_else():
    pattern = one_of(["IR", "IRing", "IRing+C_i", "a.b"])
    assert pattern == r"IRing\+C_i|IRing|a\.b|IR"  # the longest first: a name that begins another comes after it
    for name in ("IR", "IRing", "IRing+C_i", "a.b"):
        assert re.match(pattern, name).group(0) == name  # a prefix never wins, as in a path's wildcard
    assert not any(re.fullmatch(pattern, s) for s in ("IRingC_i", "axb", "I", ""))


def shell(command: str, tmp_path, **namespace) -> subprocess.CompletedProcess:
    """``command`` formatted as Snakemake formats a rule's shell (``:q`` quotes) and run by bash as Snakemake runs it
    (``set -euo pipefail``), in ``tmp_path``."""
    text = snakemake_format(command, **namespace)
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; {text}"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_logged_copies_stderr_to_the_log_and_keeps_stdout_and_the_exit_status(tmp_path):
    command = rules.logged("echo out; echo 'ring: it failed' >&2; exit 3")
    result = shell(command, tmp_path, log="job.log")
    assert result.returncode == 3
    assert result.stdout == "out\n" and result.stderr == "ring: it failed\n"
    assert (tmp_path / "job.log").read_text() == "ring: it failed\n"


def test_a_config_rule_reruns_only_a_declared_stage():
    with pytest.raises(
        ValueError, match=r"ring rerun takes no stage 'study'; it takes pretrain, lincls, transfer, detection\.$"
    ):
        CellConfig("c/config.yaml", dict, rerun="study")


@pytest.mark.parametrize("rerun", [None, "pretrain"])
def test_a_config_rule_writes_the_text_as_it_is_and_a_cell_that_never_ran_costs_nothing_more(tmp_path, rerun):
    cell = tmp_path / "results" / "cell"
    cell.mkdir(parents=True)
    text = "method: IR\nnote: 'it''s $HOME'\n"  # quotes and a $ reach the file untouched
    params = SimpleNamespace(python="/nonexistent/python", text=text, cell=str(cell))
    result = shell(
        CellConfig("c/config.yaml", dict, rerun=rerun).command,
        tmp_path,
        params=params,
        output=str(cell / "config.yaml"),
        log="config.log",
    )
    assert result.returncode == 0, result.stderr
    assert (cell / "config.yaml").read_text() == text  # no trailing newline added: printf '%s'


def test_a_finished_cell_s_config_rule_brings_it_in_line_through_its_stage(tmp_path):
    command = rules.write_config("lincls")
    assert "-m ring.plan.rerun {params.cell:q} --stage lincls" in command
    assert f"{{params.cell:q}}/slurm/{rules.SLURM_RECORD} ]; then {{params.python:q}} -m ring.cluster.detach" in command
    cell = tmp_path / "cell"
    cell.mkdir()
    (cell / rules.RUN_RECORD).write_text("{}")
    params = SimpleNamespace(python=sys.executable, text="x: 1\n", cell=str(cell))
    # The cell ran (run.json): ring.plan.rerun reads the config just written, and its one sentence reaches the log.
    result = shell(command, tmp_path, params=params, output=str(cell / "config.yaml"), log="config.log")
    assert result.returncode == 1
    log = (tmp_path / "config.log").read_text()  # the sentence is ring.plan.rerun's (its tests hold its words)
    assert log.startswith(f"ring: {cell}: Config file {cell / 'config.yaml'} ") and log.count("\n") == 1, log


def test_the_slurm_record_is_the_launcher_s():
    from ring.cluster.slurm import RECORD

    assert rules.SLURM_RECORD == RECORD


def test_a_cell_config_s_logs_stand_beside_its_files():
    cell = CellConfig(
        "results/{grid}/lincls/{dataset}/seed{seed}/config.yaml", dict, hash="results/{grid}/x/config.hash"
    )
    assert cell.config_log == "results/{grid}/lincls/{dataset}/seed{seed}/config.log"
    assert cell.hash_log == "results/{grid}/x/config.hash.log"
    assert cell.command == rules.write_config(None)


def test_a_table_rule_s_command_names_its_table_and_its_options():
    rule = TableRule(lambda grid: [], "--metrics {input:q}")
    assert rule.exts == ("csv", "md", "tex")
    assert rule.command("table4") == rules.logged(
        "{params.python:q} -m ring.reports.tables table4 --out {params.prefix:q} --metrics {input:q}"
    )


def test_a_table_is_stale_only_while_it_exists_and_a_cell_it_averages_is_gone(tmp_path):
    table, cell = tmp_path / "table1.csv", tmp_path / "metrics.json"
    cell.write_text("{}")
    assert stale_table(str(table), [str(cell)]) is None  # no table yet: the plan makes it anyway
    table.write_text("")
    assert stale_table(str(table), [str(cell)]) is None
    assert stale_table(str(table), [str(cell), str(tmp_path / "gone" / "metrics.json")]) == str(table)


def test_the_gpu_hours_read_every_existing_record_and_every_run_set_aside(tmp_path):
    done, never = tmp_path / "a" / "provenance.json", tmp_path / "b" / "provenance.json"
    done.parent.mkdir()
    done.write_text("{}")
    kept = []
    for key in ("k2", "k1"):
        (tmp_path / "b" / rules.RUNS / key).mkdir(parents=True)
        kept.append(tmp_path / "b" / rules.RUNS / key / "provenance.json")
        kept[-1].write_text("{}")
    assert with_kept_runs([str(done), str(never)]) == [str(done), *sorted(map(str, kept))]


def test_planned_records_each_job_whose_outputs_are_not_all_there_once_and_no_file(tmp_path):
    """The run's handlers read the jobs a run is to start from Planned, where Snakemake's public interface has no
    list: a job with an output missing is recorded once however often Snakemake calls its input, a finished one not."""
    planned = rules.Planned()
    done = tmp_path / "done"
    done.mkdir()
    (done / "a.json").write_text("{}")
    both = planned.input("transfer", [f"{tmp_path}/{{cell}}/a.json", f"{tmp_path}/{{cell}}/b.json"], "--launcher local")
    one = planned.input("data_check", f"{tmp_path}/{{cell}}/a.json")
    for cell in ("done", "new", "new"):  # Snakemake may evaluate an input function more than once per job
        wildcards = SimpleNamespace(cell=cell, items=lambda cell=cell: [("cell", cell)])
        assert both(wildcards) == [] and one(wildcards) == []  # no file: the plan's inputs are unchanged
    assert planned.rules() == ["data_check", "transfer"]
    assert [w.cell for w in planned.of("transfer")] == ["done", "new"]  # done/ lacks b.json
    assert [w.cell for w in planned.of("data_check")] == ["new"]
    assert [(rule, launch) for rule, launch, _ in planned.jobs.values()] == [
        ("transfer", "--launcher local"),
        ("transfer", "--launcher local"),
        ("data_check", None),
    ]


def test_a_stale_mark_reruns_the_job_that_makes_the_file_until_it_is_made_again(tmp_path, monkeypatch):
    """The plan marks a stale file (the public way to rerun a job, where it wrote Snakemake's forced files before):
    the mark, an input newer than the file, reruns its job; once the job made the file again, the mark is older and
    stays an input (a job whose set of inputs changed is rerun by Snakemake)."""
    monkeypatch.chdir(tmp_path)
    table = "results/g/tables/table1.csv"
    Path(table).parent.mkdir(parents=True)
    Path(table).write_text("old")
    assert rules.stale_input(None, [table]) == []  # nothing marked: no input
    (mark,) = rules.stale_input(table, [table])  # the table found stale: marked, and its own job's input
    assert Path(mark).stat().st_mtime >= Path(table).stat().st_mtime and not Path(mark).is_relative_to("results")
    assert rules.stale_input(None, [table]) == [mark]  # in the same plan, another input leaves the mark as it is
    assert Path(mark).stat().st_mtime >= Path(table).stat().st_mtime
    os.utime(table, (Path(mark).stat().st_mtime + 1,) * 2)  # the job wrote the table again
    monkeypatch.setattr(rules, "_MARKED", set())  # the next plan (a new Snakemake process)
    assert rules.stale_input(None, [table]) == [mark]  # the same inputs: dated back, the mark reruns nothing
    os.utime(table, (1, 1))  # even a table restored with an old time (a kept copy) is newer than it
    assert Path(mark).stat().st_mtime < Path(table).stat().st_mtime
    # Another rule's file: marked by one job's input (a detection cell's backbone), acted on by its maker's.
    backbone = tmp_path / "results/g/detection/d/IR/seed0/backbone.pkl"
    assert rules.stale_input(backbone, ["results/g/lincls/metrics.json"]) == []
    assert rules.stale_input(None, [str(backbone)]) == [str(rules.stale_mark(backbone))]
    assert str(rules.stale_mark(backbone)).startswith(".ring-stale/")  # an absolute path lies below the marks too
