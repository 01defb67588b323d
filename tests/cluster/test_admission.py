"""Whether SLURM would admit a stage's resources, before anything is submitted: the resources' own problems, a stage
that cannot use its tasks, and the workflow's one check of every resource set it will submit (SLURM's own answer,
sbatch --test-only, is asked of the cluster itself in tests/workflow/test_slurm_submit.py and
tests/cluster/test_launch.py)."""

import os

import pytest

from ring.cluster.admission import (
    CHECKED_ENV,
    node_problems,
    plan_problems,
    resource_problems,
    resource_sets,
    run_preflight,
    sbatch_test_args,
    stage_problems,
)
from ring.cluster.batch import DEFAULT_CONFIGS, load_config, merge
from ring.cluster.slurm import Resources, executor_parameters, slurm_options
from ring.core.stages import stages_with


@pytest.mark.parametrize(
    ("stage", "resources", "config", "problem"),
    [
        ("lincls", {"gpus_per_node": 2}, None, "lincls runs one task (one process on one GPU), but nodes=1 x"),
        ("transfer", {"nodes": 2}, None, "transfer runs one task (one process on one GPU), but nodes=2 x"),
        ("lincls", {}, None, None),
        ("pretrain", {"nodes": 2, "gpus_per_node": 2}, {"batch_size": 256, "bn_groups": 1}, None),
        ("pretrain", {"nodes": 2, "gpus_per_node": 8}, {"batch_size": 256, "bn_groups": 8}, None),
        ("pretrain", {"nodes": 3, "gpus_per_node": 1}, {"batch_size": 256, "bn_groups": 1}, "batch_size=256 does not"),
        ("pretrain", {"nodes": 3, "gpus_per_node": 4}, {"batch_size": 240, "bn_groups": 8}, "bn_groups=8 and the 12"),
        ("detection", {"nodes": 1, "gpus_per_node": 8}, None, None),
    ],
)
def test_a_stage_that_cannot_use_its_tasks_is_refused_before_submission(stage, resources, config, problem):
    found = stage_problems(stage, Resources(**resources), config)
    assert found == [] if problem is None else (len(found) == 1 and found[0].startswith(problem))
    assert all(p.endswith(".") and p.count(". ") == 0 for p in found)  # one sentence


def test_the_workflows_preflight_refuses_more_tasks_for_a_one_task_stage(monkeypatch):
    monkeypatch.setattr("ring.cluster.admission.sbatch_refusal", lambda res: None)
    problems = run_preflight([("lincls", slurm_options({"lincls": {"nodes": 2}}, "lincls"), {})], {})
    assert len(problems) == 1 and problems[0].startswith("lincls: lincls runs one task")


def test_signal_delay_must_leave_time_to_run():
    assert resource_problems(Resources(time_min=60, signal_delay_s=120), 10.0) == []
    (problem,) = resource_problems(Resources(time_min=2, signal_delay_s=120), 1.0)
    assert problem.startswith("signal_delay_s=120 is not shorter than time_min=2 min")


def _launch(resources: dict) -> str:
    return slurm_options({"defaults": resources}, "pretrain")


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


@pytest.mark.parametrize(
    ("stage", "resources", "node", "problem"),
    [
        ("detection", {"gpus_per_node": 8, "cpus_per_task": 6}, {"gpus": 4}, "detection asks for 8 GPUs per node"),
        ("detection", {"gpus_per_node": 4, "cpus_per_task": 6}, {"gpus": 4, "cpus": 24}, None),
        ("pretrain", {"gpus_per_node": 4, "cpus_per_task": 8}, {"cpus": 24}, "pretrain asks for 32 CPUs per node"),
        # mem_gb is per task: 4 ranks (and their loader workers) of 32 GB each are 128 GB on the node.
        ("pretrain", {"gpus_per_node": 4, "mem_gb": 32}, {"mem_gb": 96}, "pretrain asks for 128 GB of memory"),
        ("pretrain", {"gpus_per_node": 4, "mem_gb": 32}, {"mem_gb": 128}, None),
        ("prepare", {"gpus_per_node": 0, "cpus_per_task": 1, "mem_gb": 4}, {"gpus": 0, "mem_gb": 4}, None),
        ("pretrain", {"gpus_per_node": 8}, None, None),  # a site that names no node: SLURM's own check decides
        ("pretrain", {"gpus_per_node": 8, "additional": {"gres": "gpu:a100:1"}}, None, "pretrain's gres gpu:a100:1"),
        ("pretrain", {"gpus_per_node": 2, "additional": {"gres": "gpu:a100:2,nvme:1"}}, None, None),
        ("prepare", {"gpus_per_node": 0, "additional": {"gres": "gpu"}}, None, "prepare's gres gpu asks for 1 GPUs"),
    ],
)
def test_a_stage_that_does_not_fit_the_sites_largest_node_is_refused(stage, resources, node, problem):
    found = node_problems(stage, Resources(**resources), node)
    assert found == [] if problem is None else (len(found) == 1 and found[0].startswith(problem))
    assert all(p.endswith(".") and p.count(". ") == 0 for p in found)  # one sentence


def test_the_plans_check_runs_every_rule_that_needs_no_cluster():
    """Issue 50 item 4: a site of 2 x 3 GPUs, whose 6 ranks cannot split batch 256, planned without a word."""
    site = {"defaults": {"partition": "gpu"}, "pretrain": {"nodes": 2, "gpus_per_node": 3}, "largest_node": {"gpus": 4}}
    cell = {"batch_size": 256, "bn_groups": 1, "checkpoint_interval_min": 30}
    (problem,) = plan_problems("pretrain", site, cell)
    assert problem.startswith("batch_size=256 does not split evenly over the 6 processes")
    assert plan_problems("pretrain", {**site, "pretrain": {"nodes": 2, "gpus_per_node": 4}}, cell) == []
    # The shipped defaults (ring/resources/cluster.yaml) under this site: detection's 8 GPUs fit no node of 4.
    shipped = merge(load_config(DEFAULT_CONFIGS)["slurm"], site)
    (detection,) = plan_problems("detection", shipped)
    assert detection.startswith(
        "detection asks for 8 GPUs per node (gpus_per_node=8) but the site's largest node has 4"
    )
    fitting = merge(shipped, {"largest_node": {"gpus": 8, "cpus": 48, "mem_gb": 128}})
    assert [p for stage in stages_with("entry") for p in plan_problems(stage, fitting)] == []  # 8 x 6 CPUs, 8 x 16 GB
    (short,) = plan_problems("pretrain", {"pretrain": {"time_min": 20}}, cell)
    assert short.startswith("time_min=20 is shorter than one checkpoint interval (30 min)")
    (unknown,) = plan_problems("lincls", {"lincls": {"gpus": 2}})
    assert unknown.startswith("Unknown SLURM resource 'gpus'")


def test_mem_gb_is_asked_per_task():
    """Four ranks on a node each hold mem_gb: the job asks four times it of the node, to sbatch and to submitit."""
    res = Resources(gpus_per_node=4, mem_gb=1.5)
    assert "--mem=6144M" in sbatch_test_args(res) and executor_parameters(res, "x")["mem"] == "6144M"
    assert Resources(gpus_per_node=0, mem_gb=4).mem_mb_per_node == 4096  # a CPU job: one task


NODES = "multi idle vm 4 8000 gpu:2\nmulti drain vm-b 4 8000 gpu:2\n"  # sinfo -N: one row per node


@pytest.mark.parametrize(
    ("sinfo", "resources", "waits"),
    [
        # Issue 50 item 2: one of two nodes drained, a 2-node job: a plain sbatch pends, --test-only refused it.
        (NODES, {"nodes": 2}, "partition multi has 1 node(s) that take a job now where the job needs 2 (vm-b: drain)"),
        (
            NODES.replace("idle", "resv"),
            {"nodes": 2},
            "partition multi has no node that takes a job now (vm: resv, vm-b",
        ),
        (NODES, {"nodes": 3}, None),  # no configured set of 3 nodes: a real refusal
        (NODES, {"nodes": 2, "gpus_per_node": 4}, None),  # no node has 4 GPUs
        (NODES, {"nodes": 2, "gpus_per_node": 2, "mem_gb": 4}, None),  # 2 tasks x 4 GB: more than a node's 8000 MB
        (NODES, {"nodes": 1}, None),  # vm takes it now: the refusal is about something else
        (NODES.replace("drain", "down*"), {"nodes": 2}, "(vm-b: down)"),
    ],
)
def test_only_a_request_no_configured_node_set_can_hold_is_refused(monkeypatch, capsys, sinfo, resources, waits):
    import subprocess

    from ring.cluster import admission, slurm

    asked = []

    def call(args, timeout=60):
        asked.append(args)
        if args[0] == "sbatch":
            return subprocess.CompletedProcess(
                args, 1, "", "sbatch: error: Requested node configuration is not available\n"
            )
        return subprocess.CompletedProcess(args, 0, sinfo if "-N" in args else "idle\n", "")

    monkeypatch.setattr(slurm, "slurm_call", call)
    res = Resources(**{"partition": "multi", "gpus_per_node": 2, "cpus_per_task": 1, "mem_gb": 1, **resources})
    refusal = admission.sbatch_refusal(res)
    err = capsys.readouterr().err
    if waits is None:
        assert refusal == "Requested node configuration is not available" and err == ""
    else:
        assert refusal is None and waits in err and "the jobs are submitted and wait PENDING" in err
    assert ["sinfo", "-h", "-N", "-o", "%P %t %N %c %m %G", "-p", "multi"] in asked  # a row per node, not per state
