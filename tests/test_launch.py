"""The SLURM launcher's pure parts (the cluster itself is exercised in test_slurm.py)."""

import os
from dataclasses import fields
from pathlib import Path

import pytest

from ring.cluster.batch import DEFAULT_CONFIGS, load_config
from ring.cluster.jobs import STAGES
from ring.cluster.launch import decide
from ring.cluster.slurm import (
    THREAD_VARIABLES,
    Resources,
    _array_members,
    config_schema,
    executor_parameters,
    resource_problems,
    sbatch_test_args,
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


def test_runs_killed_before_writing_a_segment_come_from_accounting(monkeypatch):
    from ring.cluster import accounting

    runs = [
        {"state": "REQUEUED", "started": "t0", "ended": "t1", "wall_s": 9.0, "node": "n"},
        {"state": "REQUEUED", "started": "t2", "ended": "t3", "wall_s": 11.0, "node": "n"},
        {"state": "RUNNING", "started": "t4", "ended": "Unknown", "wall_s": 1.0, "node": "n"},
    ]
    monkeypatch.setattr(accounting, "accounted_runs", lambda job_id: runs)
    written = [{"job_id": "7", "restart_count": 0, "wall_s": 9.0}]  # the first run was USR2-preempted
    current = {"job_id": "7", "restart_count": 2, "gpus": 1, "gpu_model": None}
    (added,) = accounting.missing_runs(written, current)  # only the hard-killed second run
    assert (added["restart_count"], added["wall_s"], added["outcome"]) == (1, 11.0, "killed (REQUEUED)")
    assert accounting.missing_runs(written, {**current, "restart_count": 0}) == []


# sacct -D of job 41: a first run hard-killed by an external requeue, a second run killed for good
# (scancel --signal=KILL), and a third record that never started; job 42 is another job's line.
SACCT_41 = """41|REQUEUED|2026-01-01T10:00:00|2026-01-01T10:00:09|9|n1|billing=1,cpu=1,gres/gpu=2,mem=2G,node=1
41|PENDING|Unknown|Unknown|0||billing=1,cpu=1,gres/gpu=2,mem=2G,node=1
41|FAILED|2026-01-01T10:01:00|2026-01-01T10:01:21|21|n2|billing=1,cpu=1,gres/gpu:a100=2,mem=2G,node=1
42|COMPLETED|2026-01-01T09:00:00|2026-01-01T09:10:00|600|n1|billing=1,gres/gpu=1
"""


def test_accounting_orders_a_jobs_runs_as_its_restarts():
    from ring.cluster import accounting

    runs = accounting.parse_runs(SACCT_41, "41")
    assert [(r["state"], r["wall_s"], r["node"]) for r in runs] == [
        ("REQUEUED", 9.0, "n1"),
        ("FAILED", 21.0, "n2"),
        ("PENDING", 0.0, ""),
    ]
    assert [r["gpus"] for r in runs] == [2, 2, 2]
    assert accounting.allocated_gpus("cpu=1,gres/gpu=4,gres/gpu:a100=4,node=1") == 4
    assert accounting.allocated_gpus("cpu=1") == 0


def test_a_job_killed_for_good_is_added_to_the_cells_provenance_once(tmp_path, monkeypatch):
    """Issue #11, item 6: the launcher adds an ended job's unrecorded runs before it resubmits the cell;
    the next job's segment keeps them, and a second call adds nothing."""
    import json

    from ring.cluster import accounting

    monkeypatch.setattr(accounting, "accounted_runs", lambda job_id: accounting.parse_runs(SACCT_41, job_id))
    earlier = {"job_id": "40", "restart_count": 0, "wall_s": 30.0, "gpus": 1, "outcome": "completed"}
    (tmp_path / "provenance.json").write_text(json.dumps({"seed": 3, "segments": [earlier]}))
    assert accounting.add_ended_job(tmp_path, "41") == 2  # both runs that started; none wrote a segment
    doc = json.loads((tmp_path / "provenance.json").read_text())
    assert doc["seed"] == 3 and [s.get("source") for s in doc["segments"]] == [None, "sacct", "sacct"]
    assert [(s["restart_count"], s["outcome"], s["gpus"]) for s in doc["segments"][1:]] == [
        (0, "killed (REQUEUED)", 2),
        (1, "killed (FAILED)", 2),
    ]
    assert (doc["wall_s"], doc["requeues"]) == (60.0, 1)
    assert doc["gpu_hours"] == round((30.0 * 1 + 9.0 * 2 + 21.0 * 2) / 3600, 6)
    assert accounting.add_ended_job(tmp_path, "41") == 0
    # No provenance yet (the job was killed before its first segment): the file is started with them.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert accounting.add_ended_job(fresh, "41") == 2
    assert json.loads((fresh / "provenance.json").read_text())["wall_s"] == 30.0


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


def test_a_run_that_never_got_a_node_never_ran():
    """sacct can give a pending job cancelled while accounting lags its cancel time as Start; without a
    node it never ran, and no GPU time is added for it."""
    from ring.cluster import accounting

    line = "9_1|CANCELLED by 0|2026-11-26T17:52:10|2026-11-26T17:52:10|0|None assigned|\n"
    (run,) = accounting.parse_runs(line, "9_1")
    assert not accounting.started(run)
    assert accounting.unrecorded([], "9_1", [run]) == []


def test_the_rendezvous_port_is_below_the_ephemeral_ports_and_the_same_for_every_task():
    from ring.cluster.jobs import rendezvous_port

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {job: rendezvous_port(job) for job in [str(n) for n in range(1, 5000)] + ["1074_1", "1074_2"]}
    assert all(20000 <= p < min(low, 32000) for p in ports.values())
    assert rendezvous_port("1074_1") == rendezvous_port("1074_1")
    assert len(set(ports.values())) > 3000  # spread: two jobs on one node rarely share a port


TASK_1_OF_2 = {
    "SLURM_JOB_ID": "1075",
    "SLURM_ARRAY_JOB_ID": "1074",
    "SLURM_ARRAY_TASK_ID": "1",
    "SLURM_NTASKS": "2",
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_NODEID": "0",
    "SLURM_PROCID": "1",
    "SLURM_LOCALID": "1",
    "SLURM_JOB_NODELIST": "gpu07",
}
DDP_VARS = ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"]


@pytest.mark.parametrize("inherited", [{}, {"MASTER_PORT": "29500", "RANK": "0", "WORLD_SIZE": "8"}])
def test_a_task_exports_submitits_ranks_and_the_jobs_rendezvous_port(monkeypatch, inherited):
    """Through submitit's own SLURM job environment, as in a job's task, whatever the submitting
    shell left in the environment (sbatch exports it)."""
    from ring.cluster.jobs import export_distributed_env, rendezvous_port

    # A copy of the environment, so the exported variables cannot outlive the test: a WORLD_SIZE left
    # in this process would make every later ring.pretrain subprocess wait for a peer that never comes.
    env = {k: v for k, v in os.environ.items() if k not in DDP_VARS}
    monkeypatch.setattr(os, "environ", {**env, **TASK_1_OF_2, "_TEST_CLUSTER_": "slurm", **inherited})
    export_distributed_env()
    assert {name: os.environ[name] for name in DDP_VARS} == {
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": str(rendezvous_port("1074_1")),
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
    }


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


def test_a_stop_asked_after_the_last_step_is_noted_not_acted_on(monkeypatch, capsys):
    """A USR2 between the stage's last step boundary and its return only set the stop flag: the job notes it (for
    provenance) and ignores it, as it does every later one."""
    import atexit
    import signal

    from ring.cluster import jobs
    from ring.core import stop

    monkeypatch.setattr(atexit, "register", lambda *args: None)
    before = signal.getsignal(signal.SIGUSR2)
    try:
        stop.request_stop()
        jobs.ignore_stop_signals_from_now_on("pretrain")
        signal.getsignal(signal.SIGUSR2)(signal.SIGUSR2, None)
    finally:
        signal.signal(signal.SIGUSR2, before)
    assert capsys.readouterr().err.count(jobs.IGNORED_STOP) == 2


def _edited_cell(tmp_path, record_hash):
    """A pretraining cell whose config.yaml is lr 0.01, with a launcher record of job 7 (``record_hash``) and the
    encoder that job wrote with the lr 0.03 config."""
    from ring.cluster.jobs import StageJob
    from ring.cluster.slurm import write_record
    from ring.core import config as C
    from ring.core.files import CHECKSUMS, write_json

    from .helpers import TINY_PRETRAIN

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
