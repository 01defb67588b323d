"""The SLURM primitives: a stage's resources, the job states, the retries (the cluster itself is
exercised in tests/workflow/test_slurm_*.py)."""

import json
import shlex
from dataclasses import fields
from pathlib import Path

import pytest

from ring.cluster.admission import sbatch_test_args
from ring.cluster.batch import DEFAULT_CONFIGS, load_config
from ring.cluster.slurm import (
    THREAD_VARIABLES,
    Resources,
    _array_members,
    config_schema,
    executor_parameters,
    slurm_options,
    stage_resources,
    unreachable,
)
from ring.core.stages import stages_with


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
    # mem_gb is per task: the node holds 4 x 1.5 GB.
    assert (params["gpus_per_node"], params["ntasks_per_node"], params["mem"]) == (4, 4, "6144M")
    assert (params["partition"], params["account"], params["additional_parameters"]) == (
        "gpu",
        "lab",
        {"gres": "gpu:a100:4"},
    )
    assert "qos" not in params  # unset fields are not sent
    args = sbatch_test_args(Resources(partition="gpu", gpus_per_node=2, time_min=90))
    assert args[:2] == ["sbatch", "--test-only"] and "--partition=gpu" in args and "--gpus-per-node=2" in args


def test_nodes_multiply_the_tasks_in_the_job_and_in_its_resource_check():
    res = Resources(nodes=2, gpus_per_node=4, cpus_per_task=6)
    params = executor_parameters(res, "ring-x")
    assert (params["nodes"], params["ntasks_per_node"], res.tasks) == (2, 4, 8)
    # srun inherits neither the CPUs per task (Slurm 22.05-23.02) nor, at sites that set it, a kind kill policy.
    assert params["srun_args"] == ["--cpus-per-task=6", "--kill-on-bad-exit=0"]
    assert "--nodes=2" in sbatch_test_args(res) and "--ntasks-per-node=4" in sbatch_test_args(res)
    assert Resources().tasks == 1 and Resources(gpus_per_node=0).tasks == 1
    with pytest.raises(ValueError, match="SLURM resource nodes: 0 is less than the minimum of 1"):
        Resources.from_dict({"nodes": 0})


def test_unknown_resource_names_the_known_ones():
    with pytest.raises(ValueError, match="Unknown SLURM resource 'gpus'; known: .*gpus_per_node"):
        Resources.from_dict({"gpus": 2})


def test_resources_and_the_config_schema_are_one_definition():
    # A key valid in the schema but not in Resources (or the reverse) would pass one check and fail
    # the other: the shipped `detection:` block was rejected by the schema that way.
    schema = config_schema()
    assert set(schema["$defs"]["resources"]["properties"]) == {f.name for f in fields(Resources)}
    assert set(schema["properties"]["slurm"]["properties"]) == {"defaults", "largest_node", *stages_with("entry")}


def test_the_shipped_slurm_profile_resolves_every_stage():
    config = load_config(DEFAULT_CONFIGS)
    for stage in stages_with("entry"):
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


def test_pending_array_ranges_are_expanded():
    assert _array_members("12_[0-2,5%4]") == ["12_0", "12_1", "12_2", "12_5"]
    assert _array_members("12_7") == ["12_7"] and _array_members("12") == ["12"]


def test_controller_outages_are_told_apart_from_refusals():
    assert unreachable(
        "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
    )
    assert not unreachable(
        "sbatch: error: Batch job submission failed: Invalid account or account/partition combination"
    )


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


def test_slurm_options_carry_the_stages_merged_resources_and_verbose():
    slurm = {"defaults": {"partition": "gpu", "time_min": 60}, "lincls": {"time_min": 30}}
    options = slurm_options(slurm, "lincls", verbose=True)
    words = shlex.split(options)
    assert words[:3] == ["--launcher", "slurm", "--resources"] and words[-1] == "--verbose"
    assert json.loads(words[3]) == {"partition": "gpu", "time_min": 30}  # the stage's block over the defaults
    assert not slurm_options({}, "lincls").endswith("--verbose")
