"""The SLURM launcher's pure parts (the cluster itself is exercised in tests/workflow/test_slurm.py)."""

import json
import os
import shlex
from dataclasses import fields
from pathlib import Path

import pytest

from ring.cluster.batch import DEFAULT_CONFIGS, load_config
from ring.cluster.jobs import STAGES
from ring.cluster.launch import decide
from ring.cluster.slurm import (
    CHECKED_ENV,
    THREAD_VARIABLES,
    Resources,
    _array_members,
    config_schema,
    executor_parameters,
    resource_problems,
    resource_sets,
    run_preflight,
    sbatch_test_args,
    slurm_options,
    stage_resources,
    unreachable,
)


def test_jobs_take_their_thread_counts_from_the_allocation():
    params = executor_parameters(Resources(cpus_per_task=6, setup=["source activate ring"]), "ring-x")
    # Snakemake exports 1-thread settings for the waiting client; the job must not inherit them.
    assert params["setup"][: len(THREAD_VARIABLES)] == [f"export {v}=6" for v in THREAD_VARIABLES]
    assert params["setup"][-1] == "source activate ring"


def test_one_task_per_gpu_and_the_documented_fields():
    params = executor_parameters(
        Resources(partition="gpu", account="lab", gpus_per_node=4, mem_gb=1.5, additional={"gres": "gpu:a100:4"}),
        "ring-x",
    )
    assert (params["gpus_per_node"], params["ntasks_per_node"], params["mem"]) == (4, 4, "1536M")
    assert (params["partition"], params["account"], params["additional_parameters"]) == (
        "gpu",
        "lab",
        {"gres": "gpu:a100:4"},
    )
    assert "qos" not in params  # unset fields are not sent
    args = sbatch_test_args(Resources(partition="gpu", gpus_per_node=2, time_min=90))
    assert args[:2] == ["sbatch", "--test-only"] and "--partition=gpu" in args and "--gpus-per-node=2" in args


def test_unknown_resource_names_the_known_ones():
    with pytest.raises(ValueError, match="Unknown SLURM resource 'gpus'; known: .*gpus_per_node"):
        Resources.from_dict({"gpus": 2})


def test_resources_and_the_config_schema_are_one_definition():
    # A key valid in the schema but not in Resources (or the reverse) would pass one check and fail
    # the other: the shipped `detection:` block was rejected by the schema that way.
    schema = config_schema()
    assert set(schema["$defs"]["resources"]["properties"]) == {f.name for f in fields(Resources)}
    assert set(schema["properties"]["slurm"]["properties"]) == {"defaults", *STAGES}


def test_the_shipped_slurm_profile_resolves_every_stage():
    config = load_config(DEFAULT_CONFIGS)
    for stage in STAGES:
        res = Resources.from_dict(stage_resources(config["slurm"], stage))
        assert res.partition == "gpu" and res.time_min > res.signal_delay_s / 60
    assert Resources.from_dict(stage_resources(config["slurm"], "detection")).gpus_per_node == 8


def test_a_site_file_overrides_single_keys_of_the_shipped_blocks(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("slurm: {defaults: {account: lab}, lincls: {mem_gb: 48}}\n")
    config = load_config([*DEFAULT_CONFIGS, site])
    lincls = stage_resources(config["slurm"], "lincls")
    assert (lincls["account"], lincls["mem_gb"], lincls["time_min"], lincls["partition"]) == ("lab", 48, 1440, "gpu")


def test_a_badly_typed_resource_is_one_sentence():
    with pytest.raises(ValueError, match=r"^SLURM resource mem_gb: 'lots' is not of type 'number'; fix it in"):
        Resources.from_dict({"mem_gb": "lots"})


@pytest.mark.parametrize(
    "state, present, action",
    [
        ("COMPLETED", True, "collect"),  # finished while no client watched: collected, never rerun
        ("COMPLETED", False, "resubmit"),  # Snakemake deleted the outputs of an incomplete rule: resume
        ("RUNNING", False, "wait"),
        ("REQUEUED", False, "wait"),
        ("PENDING", True, "wait"),
        (None, False, "wait"),  # unknown: waited on for unknown_grace_s, then resubmitted
        ("CANCELLED", False, "resubmit"),
        ("TIMEOUT", False, "resubmit"),
        ("NODE_FAIL", True, "resubmit"),
    ],
)
def test_a_restarted_client_decides_from_the_recorded_jobs_state(state, present, action):
    assert decide(state, present) == action


def test_pending_array_ranges_are_expanded():
    assert _array_members("12_[0-2,5%4]") == ["12_0", "12_1", "12_2", "12_5"]
    assert _array_members("12_7") == ["12_7"] and _array_members("12") == ["12"]


def test_signal_delay_must_leave_time_to_run():
    assert resource_problems(Resources(time_min=60, signal_delay_s=120), 10.0) == []
    (problem,) = resource_problems(Resources(time_min=2, signal_delay_s=120), 1.0)
    assert problem.startswith("signal_delay_s=120 is not shorter than time_min=2 min")


def test_controller_outages_are_told_apart_from_refusals():
    assert unreachable(
        "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
    )
    assert not unreachable(
        "sbatch: error: Batch job submission failed: Invalid account or account/partition combination"
    )


def _fake_job(tmp_path, job_id="9_1"):
    from types import SimpleNamespace

    (tmp_path / "job.err").write_text("ring: the stage's own reason\n")
    return SimpleNamespace(
        job_id=job_id,
        paths=SimpleNamespace(stderr=tmp_path / "job.err"),
        done=lambda force_check=False: True,
        results=lambda: [0],
    )


@pytest.mark.parametrize(
    "states, adopted, outcome",
    [
        # Accounting lagged the cancel of a pending array task: a stale PENDING, then CANCELLED.  Adopted
        # from the cell's record, that is the cancelled pending job decide() resubmits, seen late.
        (["PENDING", "CANCELLED"], True, "gone"),
        ([None, "CANCELLED"], True, "gone"),
        # A job seen running, or one this client submitted itself, was cancelled on purpose: the rule fails.
        (["PENDING", "RUNNING", "CANCELLED"], True, "failed"),
        (["PENDING", "CANCELLED"], False, "failed"),
        (["RUNNING", "FAILED"], True, "failed"),
        (["PENDING", "RUNNING", "COMPLETED"], True, "completed"),
    ],
)
def test_the_waiting_client_tells_a_late_seen_cancel_from_a_failure(
    states, adopted, outcome, tmp_path, monkeypatch, capsys
):
    from ring.cluster import accounting, launch, slurm

    job = _fake_job(tmp_path)
    replies = iter(states)
    monkeypatch.setattr(slurm, "job_states", lambda ids: {ids[0]: next(replies)})
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 1)  # a run to report, as in CI
    res = Resources(poll_s=0, unknown_grace_s=60)
    assert launch.wait(job, tmp_path, res, adopted=adopted) == outcome
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ring: ")]
    if outcome == "failed":
        # The last sentence (the one ring.core.failures shows) is the stage's reason, not the accounting line.
        assert said[-1] == "ring: the stage's own reason" and any("failed (" in line for line in said)


def _polls(monkeypatch, replies):
    """SLURM's clients answering each poll from ``replies``: (sacct output, squeue output) pairs, in order."""
    import subprocess

    from ring.cluster import slurm

    answers = iter(replies)
    current = {}

    def call(args, timeout=60):
        if args[0] == "sacct":
            current["squeue"] = None
            current["sacct"], current["squeue"] = next(answers)
            return subprocess.CompletedProcess(args, 0, current["sacct"], "")
        return subprocess.CompletedProcess(args, 0, current["squeue"], "")

    monkeypatch.setattr(slurm, "slurm_call", call)


def test_status_lines_change_only_when_the_job_does(tmp_path, monkeypatch, capsys):
    """Issue 34 item 7: accounting learns of a start a poll or two after the controller; the client printed
    RUNNING, PENDING, RUNNING.  A real requeue (the controller holds the job PENDING again) is still shown."""
    from ring.cluster import launch

    _polls(
        monkeypatch,
        [
            ("", "9_1|RUNNING\n"),
            ("9_1|PENDING\n", "9_1|RUNNING\n"),
            ("9_1|RUNNING\n", ""),
            ("9_1|REQUEUED\n", ""),
            ("9_1|PENDING\n", "9_1|PENDING\n"),
            ("9_1|PENDING\n", "9_1|RUNNING\n"),
            ("9_1|COMPLETED\n", ""),
        ],
    )
    assert launch.wait(_fake_job(tmp_path), tmp_path, Resources(poll_s=0)) == "completed"
    shown = [line.split(" SLURM job 9_1 ")[1].split()[0] for line in capsys.readouterr().err.splitlines()]
    assert shown == ["RUNNING", "REQUEUED", "PENDING", "RUNNING", "COMPLETED"]


def test_a_cancelled_pending_job_keeps_accountings_word(monkeypatch):
    from ring.cluster import slurm

    _polls(monkeypatch, [("9_1|PENDING\n", "")])  # the controller no longer holds it: accounting has not caught up
    assert slurm.job_states(["9_1"]) == {"9_1": "PENDING"}


@pytest.mark.parametrize("verbose", [False, True])
def test_retry_lines_name_the_cell_and_slurms_own_words_only_when_verbose(verbose, monkeypatch, capsys):
    """Issue 34 item 7: many clients wait side by side; each retry line says which cell it is, and sbatch's raw
    error lines come only with --verbose."""
    from ring.cluster import slurm

    raw = "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
    tries = iter([slurm.ControllerUnreachable(raw), "submitted"])

    def action():
        reply = next(tries)
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setattr(slurm.time, "sleep", lambda s: None)
    monkeypatch.setitem(slurm.VERBOSE, "on", verbose)
    assert slurm.retrying(action, Resources(), "submitting", cell=Path("results/t/pretrain/d/IR/seed0")) == "submitted"
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ring: results/t/pretrain/d/IR/seed0: the SLURM controller is unreachable while submitting")
    assert ("sbatch: error" in line) == verbose


def test_stop_signals_after_the_outputs_are_noted_in_the_jobs_segment(tmp_path, capsys):
    """Issue 34 item 3: the job's log says it ignored USR2 after its outputs; provenance says it too."""
    import json
    from types import SimpleNamespace

    from ring.cluster import launch
    from ring.cluster.jobs import IGNORED_STOP

    log = tmp_path / "7_0_log.err"
    log.write_text(f"ring: the pretrain job {IGNORED_STOP}; ignored\n" * 2)
    (tmp_path / "provenance.json").write_text(
        json.dumps(
            {"segments": [{"job_id": "6", "outcome": "killed (COMPLETED)"}, {"job_id": "7", "outcome": "completed"}]}
        )
    )
    launch.note_ignored_stops(tmp_path, SimpleNamespace(job_id="7", paths=SimpleNamespace(stderr=log)))
    segments = json.loads((tmp_path / "provenance.json").read_text())["segments"]
    assert [s.get("stop_signals_after_outputs") for s in segments] == [None, 2]
    assert "SLURM job 7 " + IGNORED_STOP + " (2x)" in capsys.readouterr().err


def _edited_cell(tmp_path, record_hash):
    """A pretraining cell whose config.yaml is lr 0.01, with a launcher record of job 7 (``record_hash``) and the
    encoder that job wrote with the lr 0.03 config."""
    from ring.cluster.jobs import StageJob
    from ring.cluster.slurm import write_record
    from ring.core import config as C
    from ring.core.files import CHECKSUMS, write_json
    from tests.helpers import TINY_PRETRAIN

    cell = tmp_path / "results" / "g" / "pretrain" / "digits" / "IR" / "seed0"
    cell.mkdir(parents=True)
    old, new = (C.PretrainConfig(method="IR", **{**TINY_PRETRAIN, "lr": lr}) for lr in (0.03, 0.01))
    C.save(new, cell / "config.yaml")
    write_record(cell, "7", cell / "slurm", "pretrain", config_hash=record_hash(C.config_hash(old)))
    (cell / "encoder.pt").write_bytes(b"lr 0.03")
    write_json(cell / CHECKSUMS, {"config_hash": C.config_hash(old), "files": {}})
    return cell, StageJob("pretrain", ["--config", str(cell / "config.yaml"), "--out", str(cell)]), C.config_hash(old)


@pytest.mark.parametrize(
    "record_hash, state",
    [
        (lambda old: old, "COMPLETED"),  # a job of the previous config that finished while no client watched
        (
            lambda old: None,
            "RUNNING",
        ),  # a record from before hashes were recorded: re-attached, then its output checked
    ],
)
def test_the_launcher_accepts_only_an_output_of_its_own_config_hash(record_hash, state, tmp_path, monkeypatch, capsys):
    """Issue 34, item 2: another config's encoder in the cell is one sentence, kept under runs/<its hash>/, and a job
    of the cell's own config is submitted; its encoder, of the right hash, is accepted."""
    from ring.cluster import accounting, launch, slurm
    from ring.core import config as C
    from ring.core.files import CHECKSUMS, write_json

    cell, job, old = _edited_cell(tmp_path, record_hash)
    wanted = C.config_hash(C.load(C.PretrainConfig, cell / "config.yaml"))
    submitted = []

    def submit(job, cell, res):
        submitted.append(_fake_job(tmp_path, job_id="8"))
        return submitted[-1]

    def wait(attached, cell, res, adopted=False):
        if attached.job_id == "8":  # the new job writes the edited config's encoder
            (cell / "encoder.pt").write_bytes(b"lr 0.01")
            write_json(cell / CHECKSUMS, {"config_hash": wanted, "files": {}})
        return "completed"

    monkeypatch.setattr(slurm, "job_states", lambda ids: {i: state for i in ids})
    monkeypatch.setattr(launch, "submit", submit)
    monkeypatch.setattr(launch, "wait", wait)
    monkeypatch.setattr(slurm, "preflight", lambda res, interval, cell=None: None)
    monkeypatch.setattr(launch, "recorded_job", lambda record: _fake_job(tmp_path, job_id=record["job_id"]))
    monkeypatch.setattr(accounting, "add_ended_job", lambda cell, job_id: 0)
    assert launch._launch_slurm(job, cell, Resources(poll_s=0)) == 0
    said = capsys.readouterr().err
    assert f"SLURM job 7 wrote encoder.pt with config {old}, not this cell's {wanted}" in said, said
    assert len(submitted) == 1 and (cell / "encoder.pt").read_bytes() == b"lr 0.01"
    assert (cell / "runs" / old / "encoder.pt").read_bytes() == b"lr 0.03"  # kept, not deleted


def test_a_running_job_of_the_previous_config_is_cancelled_before_anything_moves(tmp_path, monkeypatch, capsys):
    """Issue 34, item 2: ring.cluster.detach (the config rule's first step) cancels and waits; a job of the cell's
    own config, or one that ended, is left alone."""
    from ring.cluster import detach, slurm
    from ring.core import config as C

    cell, job, old = _edited_cell(tmp_path, lambda old: old)
    wanted = C.config_hash(C.load(C.PretrainConfig, cell / "config.yaml"))
    cancelled = []
    monkeypatch.setattr(slurm, "cancel_and_wait", lambda cell, job_id, res: cancelled.append(job_id))
    monkeypatch.setattr(slurm, "account_ended", lambda cell, job_id: None)
    for state, expected in (("COMPLETED", []), ("RUNNING", ["7"])):
        monkeypatch.setattr(slurm, "job_states", lambda ids, state=state: {i: state for i in ids})
        assert detach.detach(cell, old, Resources(), log=print) is False  # its own config: nothing to do
        assert detach.detach(cell, wanted, Resources(), log=print) is bool(expected)
        assert cancelled == expected
    assert "cancelling it first" in capsys.readouterr().out
    assert slurm.read_record(cell) is None and (cell / "slurm" / "job-7.json").is_file()  # retired
    assert (cell / "encoder.pt").exists()  # detach moves nothing: ring.plan.rerun does, after it


def _launch(resources: dict) -> str:
    return slurm_options({"defaults": resources}, "pretrain")


def test_slurm_options_carry_the_stages_merged_resources_and_verbose():
    slurm = {"defaults": {"partition": "gpu", "time_min": 60}, "lincls": {"time_min": 30}}
    options = slurm_options(slurm, "lincls", verbose=True)
    words = shlex.split(options)
    assert words[:3] == ["--launcher", "slurm", "--resources"] and words[-1] == "--verbose"
    assert json.loads(words[3]) == {"partition": "gpu", "time_min": 30}  # the stage's block over the defaults
    assert not slurm_options({}, "lincls").endswith("--verbose")


def test_resource_sets_take_each_launched_rules_largest_checkpoint_interval():
    wanted = []  # the wildcards each interval was asked for: launched jobs only
    intervals = {"pretrain": lambda wc: wanted.append(wc) or wc["interval"]}
    launches = [
        ("pretrain", _launch({"time_min": 60}), {"interval": 10.0}),
        ("pretrain_config", None, {"interval": 99.0}),  # a local rule: no launch options
        ("lincls", "--launcher local", {"interval": 99.0}),
        ("pretrain", _launch({"time_min": 60}), {"interval": 30.0}),
        ("pretrain", _launch({"time_min": 60}), {"interval": 20.0}),
        ("lincls", _launch({"time_min": 15}), {}),  # no interval for this rule
    ]
    assert resource_sets(launches, intervals) == {
        "pretrain": ({"time_min": 60}, 30.0),
        "lincls": ({"time_min": 15}, None),
    }
    assert [wc["interval"] for wc in wanted] == [10.0, 30.0, 20.0]


def test_run_preflight_reports_each_problem_and_marks_only_an_accepted_run(monkeypatch):
    monkeypatch.setenv(CHECKED_ENV, "")  # recorded, so that the mark below goes when the test ends
    monkeypatch.delenv(CHECKED_ENV)
    bad = [("pretrain", _launch({"gpus": 2}), {})]  # refused before any sbatch --test-only
    problems = run_preflight(bad + bad, {})
    assert len(problems) == 1 and problems[0].startswith("pretrain: ") and "gpus" in problems[0]
    assert CHECKED_ENV not in os.environ
    assert run_preflight([("lincls", "--launcher local", {})], {}) == [] and os.environ[CHECKED_ENV] == ""
