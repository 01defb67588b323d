"""ring.cluster.jobs: a stage as a submitit job, its rendezvous port, and what SLURM's stop signal does to it."""

import atexit
import dataclasses
import os
import signal
import sys
import types
from pathlib import Path

import pytest

from ring.cluster import jobs
from ring.core import stop
from ring.core.stages import STAGES, stages_with


def test_the_rendezvous_port_is_below_the_ephemeral_ports_and_the_same_for_every_task():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {job: jobs.rendezvous_port(job) for job in [str(n) for n in range(1, 5000)] + ["1074_1", "1074_2"]}
    assert all(20000 <= p < min(low, 32000) for p in ports.values())
    assert jobs.rendezvous_port("1074_1") == jobs.rendezvous_port("1074_1")
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
    # A copy of the environment, so the exported variables cannot outlive the test: a WORLD_SIZE left
    # in this process would make every later ring.pretrain subprocess wait for a peer that never comes.
    env = {k: v for k, v in os.environ.items() if k not in DDP_VARS}
    monkeypatch.setattr(os, "environ", {**env, **TASK_1_OF_2, "_TEST_CLUSTER_": "slurm", **inherited})
    jobs.export_distributed_env()
    assert {name: os.environ[name] for name in DDP_VARS} == {
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": str(jobs.rendezvous_port("1074_1")),
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
    }


def test_a_stop_asked_after_the_last_step_is_noted_not_acted_on(monkeypatch, capsys):
    """A USR2 between the stage's last step boundary and its return only set the stop flag: the job notes it (for
    provenance) and ignores it, as it does every later one."""
    monkeypatch.setattr(atexit, "register", lambda *args: None)
    before = signal.getsignal(signal.SIGUSR2)
    try:
        stop.request_stop()
        jobs.ignore_stop_signals_from_now_on("pretrain")
        signal.getsignal(signal.SIGUSR2)(signal.SIGUSR2, None)
    finally:
        signal.signal(signal.SIGUSR2, before)
    assert capsys.readouterr().err.count(jobs.IGNORED_STOP) == 2


def test_an_unknown_stage_is_one_sentence():
    with pytest.raises(
        ValueError, match=r"^Unknown stage 'pretrian'; stages are pretrain, lincls, transfer, detection, prepare\.$"
    ):
        jobs.StageJob("pretrian", [])


def test_every_stage_a_launcher_runs_names_the_output_it_writes_last():
    launched = stages_with("entry")
    assert all(s.output for s in launched.values()) and launched["pretrain"].output == "encoder.pt"


def test_a_job_keeps_a_copy_of_its_arguments_and_shows_them():
    argv = ["--config", "c.yaml"]
    job = jobs.StageJob("lincls", argv)
    argv.append("--out")  # the caller's list changing later does not change the job
    assert job.argv == ["--config", "c.yaml"] and repr(job) == "StageJob('lincls', ['--config', 'c.yaml'])"


@pytest.fixture
def fake_stage(monkeypatch):
    """The pretrain stage replaced by a module whose ``main`` is the test's: a job runs it as it runs the real one."""
    module = types.ModuleType("fake_stage")
    monkeypatch.setitem(sys.modules, "fake_stage", module)
    monkeypatch.setitem(STAGES, "pretrain", dataclasses.replace(STAGES["pretrain"], entry="fake_stage"))
    return module


@pytest.fixture
def one_task(monkeypatch):
    """A one-task SLURM job's environment, as submitit's JobEnvironment reads it; SIGUSR2's handler put back after."""
    for name, value in {
        "_TEST_CLUSTER_": "slurm",
        "SLURM_JOB_ID": "75",
        "SLURM_NTASKS": "1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_JOB_NODELIST": "gpu07",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(atexit, "register", lambda *args: None)  # the shutdown handler of the real job, not pytest's
    before = signal.getsignal(signal.SIGUSR2)
    yield
    signal.signal(signal.SIGUSR2, before)


def test_run_here_returns_the_stages_exit_status(fake_stage):
    seen = []
    fake_stage.main = lambda argv: seen.append(argv) or 3
    assert jobs.StageJob("pretrain", ["--out", "x"]).run_here() == 3 and seen == [["--out", "x"]]


def test_a_stop_signal_while_the_stage_runs_only_asks_it_to_stop(fake_stage, one_task, capsys):
    def main(argv):
        os.kill(os.getpid(), signal.SIGUSR2)  # SLURM's preemption / time-limit warning, mid-run
        return 0 if stop.stop_requested() else 5

    fake_stage.main = main
    submitit_handler = signal.signal(signal.SIGUSR2, lambda *_: pytest.fail("submitit's handler ran mid-run"))
    try:
        assert jobs.StageJob("pretrain", []).__call__() == "done"
        # The outputs are complete: a later USR2 is noted and ignored, neither requeued nor fatal.
        os.kill(os.getpid(), signal.SIGUSR2)
    finally:
        signal.signal(signal.SIGUSR2, submitit_handler)
    assert capsys.readouterr().err.count(jobs.IGNORED_STOP) == 2  # the stop asked mid-run, and the later one


def test_a_failing_stage_is_stagefailed_and_gives_the_signal_back_to_submitit(fake_stage, one_task):
    fake_stage.main = lambda argv: 2

    def submitit_handler(*_):
        pass

    signal.signal(signal.SIGUSR2, submitit_handler)
    with pytest.raises(jobs.StageFailed, match=r"^ring\.pretrain exited with status 2$"):
        jobs.StageJob("pretrain", []).__call__()
    assert signal.getsignal(signal.SIGUSR2) is submitit_handler


def test_a_preempted_stage_hands_over_to_submitits_requeue(fake_stage, one_task, capsys):
    def main(argv):
        raise stop.Preempted("checkpoint written at epoch 3, step 7")

    fake_stage.main = main
    called = []
    signal.signal(signal.SIGUSR2, lambda signum, frame: called.append(signum))
    with pytest.raises(stop.Preempted):
        jobs.StageJob("pretrain", []).__call__()
    assert called == [signal.SIGUSR2]  # submitit's handler: checkpoint(), requeue, exit
    assert "ring: checkpoint written at epoch 3, step 7; requeueing" in capsys.readouterr().err


def test_a_requeued_job_meets_at_another_port():
    """submitit issue 1613: a straggler of the previous run must not join the requeued run's store."""
    first = jobs.rendezvous_port("1074_1")
    assert jobs.rendezvous_port("1074_1", restart=0) == first  # a first run keeps the port it always had
    restarts = [jobs.rendezvous_port("1074_1", restart=n) for n in range(1, 6)]
    assert first not in restarts and len(set(restarts)) == 5
    assert all(20000 <= p < 32000 for p in restarts)


RANK_0_OF_4_ON_2_NODES = {
    "SLURM_JOB_ID": "2001",
    "SLURM_NTASKS": "4",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NODEID": "0",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_RESTART_COUNT": "2",
}


@pytest.mark.parametrize("node", ["gpu07", "gpu08"])
def test_rank_0_must_run_on_the_node_master_addr_names(monkeypatch, node):
    env = {k: v for k, v in os.environ.items() if k not in DDP_VARS}
    environ = {**env, **RANK_0_OF_4_ON_2_NODES, "SLURMD_NODENAME": node, "_TEST_CLUSTER_": "slurm"}
    monkeypatch.setattr(os, "environ", environ)
    if node == "gpu08":
        with pytest.raises(RuntimeError, match="rank 0 runs on gpu08 but MASTER_ADDR names gpu07"):
            jobs.export_distributed_env()
        return
    jobs.export_distributed_env()
    assert (os.environ["MASTER_ADDR"], os.environ["WORLD_SIZE"], os.environ["LOCAL_WORLD_SIZE"]) == ("gpu07", "4", "2")
    assert os.environ["MASTER_PORT"] == str(jobs.rendezvous_port("2001", restart=2))
