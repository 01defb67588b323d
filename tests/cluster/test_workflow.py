"""`ring run`'s command line (ring.cluster.workflow): the workflow, the profile, its config files absolute, the
site's file, the grid and the results folder.  tests/project/test_wheel.py runs it from an installed wheel."""

import sys
from pathlib import Path

import pytest
import yaml

from ring.cluster import batch, workflow
from tests import ROOT
from tests.helpers import TINY_PRETRAIN_BLOCK


def line(tmp_path: Path, *argv: str) -> list[str]:
    args, rest = workflow.parser().parse_known_args(list(argv))
    return workflow.command(args, rest, tmp_path)


def option(words: list[str], name: str) -> list[str]:
    """The values that follow ``name`` up to the next option."""
    start = words.index(name) + 1
    end = next((i for i in range(start, len(words)) if words[i].startswith("-")), len(words))
    return words[start:end]


def test_a_checkouts_ring_runs_the_checkouts_workflow_with_absolute_config_files(tmp_path):
    words = line(tmp_path, "all_tables", "-n", "--profile", "local", "--grid", "paper")
    assert words[:5] == [sys.executable, "-m", "snakemake", "all_tables", "-n"]  # targets first: never a config value
    assert option(words, "--snakefile") == [str(ROOT / "Snakefile")]
    assert option(words, "--profile") == [str(ROOT / "profiles" / "local")]
    assert option(words, "--configfile") == [str(ROOT / "ring" / "resources" / "config.yaml")]  # the Snakefile's
    assert option(words, "--config") == ["grid=paper"]
    assert "--directory" not in words  # results under the folder it runs in


def test_the_slurm_profiles_site_file_is_the_folders_or_sites_else_the_profiles(tmp_path):
    shipped = [str(ROOT / "ring/resources/config.yaml"), str(ROOT / "ring/resources/cluster.yaml")]
    words = line(tmp_path, "--profile", "slurm")
    assert option(words, "--configfile") == [*shipped, str(ROOT / "profiles/slurm/site.yaml")]
    (tmp_path / "site.yaml").write_text("slurm: {defaults: {partition: here}}\n")
    assert option(line(tmp_path, "--profile", "slurm"), "--configfile") == [*shipped, str(tmp_path / "site.yaml")]
    other = tmp_path / "elsewhere.yaml"
    other.write_text("slurm: {defaults: {partition: there}}\n")
    words = line(tmp_path, "--profile", "slurm", "--site", str(other))
    assert option(words, "--configfile") == [*shipped, str(other)]


def test_a_user_grid_file_and_results_folder_are_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"datasets": ["digits"], "methods": ["IR"], "seeds": [0]}))
    words = line(tmp_path, "table1", "--profile", "local", "--grid", "mine.yaml", "--results", "out", "--config", "a=1")
    assert option(words, "--config") == ["a=1", f"grid={tmp_path / 'mine.yaml'}"]
    assert option(words, "--directory") == [str(tmp_path / "out")]


def test_status_in_a_run_folder_reads_its_site_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert batch.default_configs() == [batch.resources.CONFIG, batch.resources.CLUSTER]
    (tmp_path / "site.yaml").write_text("slurm: {defaults: {partition: here}}\n")
    assert batch.default_configs()[-1] == Path("site.yaml")
    assert batch.load_config(batch.default_configs())["slurm"]["defaults"]["partition"] == "here"


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (
            ["--profile", "cloud"],
            "--profile 'cloud' is neither one of local, slurm nor a folder holding a config.yaml.",
        ),
        (["--profile", "slurm", "--site", "nowhere.yaml"], "--site nowhere.yaml names no file"),
        (["--profile", "local", "--site", "site.yaml"], "--site: the profile"),
    ],
)
def test_a_wrong_profile_or_site_is_one_sentence(tmp_path, monkeypatch, capsys, argv, refusal):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "site.yaml").write_text("slurm: {}\n")
    assert workflow.main(argv) == 1
    assert capsys.readouterr().err.startswith(f"ring: {refusal}")


def test_the_workflow_is_the_packages_copy_where_no_checkout_holds_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(workflow, "PACKAGE_PARENT", tmp_path / "site-packages")
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(workflow, "SHIPPED", shipped)
    with pytest.raises(RuntimeError, match="reinstall ring-bench"):
        workflow.workflow_root()
    (shipped / "workflow" / "rules").mkdir(parents=True)
    (shipped / "Snakefile").write_text("")
    assert workflow.workflow_root() == shipped


def test_the_users_config_files_come_after_the_packages_so_their_keys_win(tmp_path, monkeypatch):
    """Issue 52 item 3: `ring run --configfile mine.yaml` put the package's files after the user's, and Snakemake keeps
    a repeated key's last value: a grid named in mine.yaml planned the profile's grid (the paper's 1,856 jobs)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("grid: mine\n")
    (tmp_path / "more.yaml").write_text("data_root: /datasets\n")
    shipped = [str(ROOT / "ring/resources/config.yaml"), str(ROOT / "ring/resources/cluster.yaml")]
    words = line(tmp_path, "table1", "--profile", "slurm", "--configfile", "mine.yaml", "--configfiles", "more.yaml")
    assert option(words, "--configfile") == [
        *shipped,
        str(ROOT / "profiles/slurm/site.yaml"),
        str(tmp_path / "mine.yaml"),
        str(tmp_path / "more.yaml"),
    ]
    assert words.count("--configfile") == 1 and "--configfiles" not in words


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (
            ["--results", "taken"],
            "--results taken: {tmp}/taken is a file, not a folder; give a folder to work in (made when missing).",
        ),
        (
            ["--results", "taken/inside"],
            "--results taken/inside: {tmp}/taken is a file, not a folder; give a folder to work in (made when "
            "missing).",
        ),
        (
            ["--configfile", "nowhere.yaml"],
            "--configfile nowhere.yaml names no file; give the path of a YAML config file.",
        ),
    ],
)
def test_a_file_as_results_folder_or_a_missing_config_file_is_one_sentence(
    tmp_path, monkeypatch, capsys, argv, refusal
):
    # Before: FileExistsError's traceback from mkdir, and a missing --configfile went to Snakemake behind the package's.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("a file\n")
    assert workflow.main(["table1", "--profile", "local", *argv]) == 1
    assert capsys.readouterr().err == f"ring: {refusal.format(tmp=tmp_path.resolve())}\n"
    assert (tmp_path / "taken").read_text() == "a file\n"


def test_a_refused_run_leaves_no_results_folder_and_the_corrected_one_plans(tmp_path, monkeypatch, capsys):
    """Issue 52 item 2: `ring run --results DIR` made DIR before Snakemake refused the run, and left it behind."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "note.txt").write_text("mine\n")
    argv = ["--profile", "local", "--results", "kept/new/results", "-n", "--quiet"]
    assert workflow.main(["tabel1", *argv]) == 1
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["kept", "kept/note.txt"]
    assert workflow.main(["table1", *argv]) == 0
    assert (tmp_path / "kept" / "new" / "results").is_dir()


def test_run_defaults_to_the_local_profile_and_status_to_the_grid_run_last_used_here(tmp_path, monkeypatch, capsys):
    """Issue 51 item 3: `ring run` needed --profile and `ring status` --grid, even right after a run in the folder."""
    monkeypatch.chdir(tmp_path)
    assert option(line(tmp_path, "all_tables", "-n"), "--profile") == [str(ROOT / "profiles" / "local")]
    # No run here yet: status reads the smoke grid (the package's default grid).
    assert batch.main(["status"]) == 0
    assert "digits_colour" in capsys.readouterr().out
    mine = {"datasets": ["digits"], "methods": ["IR"], "seeds": [3], "pretrain": {"all": TINY_PRETRAIN_BLOCK}}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(mine))
    ran = []
    monkeypatch.setattr(
        workflow.subprocess, "run", lambda words, env: ran.append(words) or type("R", (), {"returncode": 0})
    )
    assert workflow.main(["-n", "table1", "--grid", "mine.yaml"]) == 0 and ran
    assert not Path("results").exists()  # a plan records nothing: it writes no results folder
    assert workflow.main(["table1", "--grid", "mine.yaml"]) == 0
    assert workflow.last_grid(Path("results")) == str(tmp_path / "mine.yaml")
    assert batch.main(["status"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:4] == ["pretrain", "digits", "IR", "seed3"]
    # Without --grid, the grid the profile's config files name (the package's: smoke) is the one recorded.
    assert workflow.main(["table1"]) == 0 and workflow.last_grid(Path("results")) == "smoke"
    assert batch.main(["estimate"]) == 1  # the other commands still need --grid, said in one sentence
    assert capsys.readouterr().err.startswith("ring: estimate needs --grid")
