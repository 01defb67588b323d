"""Objectives: the loss modules of the methods of :data:`ring.core.methods.METHODS`.

Each method's :class:`ring.core.methods.Objective` names its torch class (``implementation``); the class builds the
encoder it trains and itself from the cell's :class:`ring.core.objective_settings.ObjectiveSettings` (its resolved
method and dataset, the shared values, its key groups' frozen configs), which the stage's entry point read from the
config once.  This module only calls them.  The objectives' option lists are :mod:`ring.engine`'s (torch-free, for
the plan).
"""

from __future__ import annotations

from torch import nn

from ring.core.methods import Method
from ring.core.objective_settings import ObjectiveSettings


def views_per_image(m: Method) -> int:
    """How many views of each image method ``m``'s objective takes."""
    return m.objective.n_views


def build_encoder(settings: ObjectiveSettings) -> nn.Module:
    """The network the cell's method trains (one ResNet-18 with its head, or CMC's L and ab pair)."""
    return settings.method.objective.load().build_encoder(settings)


def build_objective(settings: ObjectiveSettings, model: nn.Module, n_train: int, max_chunk_elements: int) -> nn.Module:
    """The cell's method's loss module for ``model`` (the network it trains, as wrapped for the step), ``n_train``
    training images, and selections of at most ``max_chunk_elements`` similarities at once
    (:func:`ring.engine.objectives.ring.chunk_elements` sizes it for the device)."""
    return settings.method.objective.load().from_settings(settings, model, n_train, max_chunk_elements)
