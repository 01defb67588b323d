"""The SLURM launcher's pure parts (the cluster itself is exercised in test_slurm.py)."""

import pytest

from ring.launch import THREAD_VARIABLES, Resources, executor_parameters, sbatch_test_args


def test_jobs_take_their_thread_counts_from_the_allocation():
    params = executor_parameters(Resources(cpus_per_task=6, setup=["source activate ring"]), "ring-x")
    # Snakemake exports 1-thread settings for the waiting client; the job must not inherit them.
    assert params["setup"][: len(THREAD_VARIABLES)] == [f"export {v}=6" for v in THREAD_VARIABLES]
    assert params["setup"][-1] == "source activate ring"


def test_one_task_per_gpu_and_the_documented_fields():
    params = executor_parameters(Resources(partition="gpu", account="lab", gpus_per_node=4, mem_gb=1.5,
                                           additional={"gres": "gpu:a100:4"}), "ring-x")
    assert (params["gpus_per_node"], params["ntasks_per_node"], params["mem"]) == (4, 4, "1536M")
    assert (params["partition"], params["account"], params["additional_parameters"]) == ("gpu", "lab", {"gres": "gpu:a100:4"})
    assert "qos" not in params  # unset fields are not sent
    args = sbatch_test_args(Resources(partition="gpu", gpus_per_node=2, time_min=90))
    assert args[:2] == ["sbatch", "--test-only"] and "--partition=gpu" in args and "--gpus-per-node=2" in args


def test_unknown_resource_names_the_known_ones():
    with pytest.raises(ValueError, match="Unknown SLURM resource 'gpus'; known: .*gpus_per_node"):
        Resources.from_dict({"gpus": 2})
