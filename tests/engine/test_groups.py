"""ring.engine.groups: the layouts of a batch and its BatchNorm groups over the processes, and the sentence refusing
one that does not split."""

import pytest

from ring.engine.groups import bn_layout, world_problem


@pytest.mark.parametrize(
    ("batch_size", "bn_groups", "world", "layout", "problem"),
    [
        (640, 1, 4, (1, 4), None),  # IR, CMC, LA on 4 GPUs: one group spread over all 4
        (256, 8, 16, (1, 2), None),  # MoCo on 2 nodes x 8 GPUs: each group on 2 GPUs
        (256, 8, 4, (2, 1), None),  # MoCo on 4 GPUs: 2 groups in each
        (256, 8, 3, None, "batch_size=256 does not split evenly over the 3 processes"),
        (240, 8, 12, None, "bn_groups=8 and the 12 processes (nodes x gpus_per_node) do not nest"),
    ],
)
def test_world_sizes_that_split_the_batch_and_its_groups(batch_size, bn_groups, world, layout, problem):
    found = world_problem(batch_size, bn_groups, world)
    assert (found is None) if problem is None else found.startswith(problem)
    if layout:
        assert bn_layout(bn_groups, world) == layout


def test_each_process_share_must_split_into_its_groups():
    """72 images over 8 processes is 9 each, which 2 groups per process (bn_groups 16) cannot split."""
    assert world_problem(72, 16, 8) == (
        "the 9 images of each of the 8 processes do not split into its 2 BatchNorm groups; choose a batch_size that "
        "is a multiple of bn_groups"
    )


def test_a_problem_is_one_clause_naming_the_fix():
    for problem in (world_problem(100, 1, 3), world_problem(240, 8, 12)):
        assert problem.count(";") == 1 and "choose" in problem.split(";")[1] and not problem.endswith(".")
