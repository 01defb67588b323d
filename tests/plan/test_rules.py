import re
import subprocess
import sys
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
