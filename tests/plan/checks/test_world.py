"""Processes, the batch and its BatchNorm groups (ring.plan.checks.world): the rule checked before submission."""

import pytest

from ring.plan.checks.world import bn_layout, world_problem


@pytest.mark.parametrize(
    "batch_size, bn_groups, world, layout",
    [(256, 1, 1, (1, 1)), (256, 8, 1, (8, 1)), (256, 8, 8, (1, 1)), (256, 2, 8, (1, 4)), (512, 16, 4, (4, 1))],
)
def test_a_layout_that_nests_is_accepted_and_laid_out_one_way(batch_size, bn_groups, world, layout):
    assert world_problem(batch_size, bn_groups, world) is None
    groups, span = bn_layout(bn_groups, world)
    assert (groups, span) == layout and 1 in (groups, span)
    assert groups * world == bn_groups * span  # as many groups over all processes as one process would make


def test_each_process_share_must_split_into_its_groups():
    """72 images over 8 processes is 9 each, which 2 groups per process (bn_groups 16) cannot split."""
    assert world_problem(72, 16, 8) == (
        "the 9 images of each of the 8 processes do not split into its 2 BatchNorm groups; choose a batch_size that "
        "is a multiple of bn_groups"
    )


def test_a_problem_is_one_clause_naming_the_fix():
    for problem in (world_problem(100, 1, 3), world_problem(240, 8, 12)):
        assert problem.count(";") == 1 and "choose" in problem.split(";")[1] and not problem.endswith(".")
