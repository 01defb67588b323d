"""Whether SLURM would admit a stage's resources, before anything is submitted: the resources' own problems, a stage
that cannot use its tasks, and the workflow's one check of every resource set it will submit (SLURM's own answer,
sbatch --test-only, is asked of the cluster itself in tests/workflow/test_slurm_submit.py and
tests/cluster/test_launch.py)."""

import os

import pytest

from ring.cluster.admission import CHECKED_ENV, resource_problems, resource_sets, run_preflight, stage_problems
from ring.cluster.slurm import Resources, slurm_options


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
