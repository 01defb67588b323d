"""Objectives: the loss modules of the methods of :data:`ring.core.methods.METHODS`.

Each method's :class:`ring.core.methods.Objective` names its torch class (``implementation``); the class builds the
encoder it trains and itself from a pretraining config.  This module only calls them, with the method (and the
dataset) its caller looked up once.  The objectives' option lists are :mod:`ring.engine`'s (torch-free, for the plan).
"""

from __future__ import annotations

import torch
from torch import nn

from ring.core.catalog import DatasetSpec
from ring.core.methods import Method
from ring.engine.objectives.ring import chunk_elements


def views_per_image(m: Method) -> int:
    """How many views of each image method ``m``'s objective takes."""
    return m.objective.n_views


def build_encoder(m: Method, cfg, dataset: DatasetSpec | None = None) -> nn.Module:
    """The network method ``m`` trains (one ResNet-18 with its head, or CMC's L and ab pair) on ``dataset``, the
    catalog entry the caller resolved: an implementation that reads it (``reads_dataset``, CMC's Lab pair: the
    statistics its views are normalised with) gets it, the others are built from the config alone."""
    implementation = m.objective.load()
    if getattr(implementation, "reads_dataset", False):
        return implementation.build_encoder(cfg, dataset)
    return implementation.build_encoder(cfg)


def build_objective(
    m: Method,
    cfg,
    encoder: nn.Module,
    n_train: int,
    device: torch.device | None = None,
    max_chunk_elements: int | None = None,
) -> nn.Module:
    """The objective module of method ``m`` (resolved by the caller's entry point, :func:`ring.core.methods.method`)
    with a pretraining config ``cfg``, to train on ``device``.  ``max_chunk_elements``: the selection's chunk size when
    the caller already sized it (see :func:`ring.engine.objectives.ring.chunk_elements`), else sized here from the
    config and device."""
    if max_chunk_elements is None:
        max_chunk_elements = chunk_elements(cfg.max_chunk_elements, device or torch.device("cpu"))
    return m.objective.load().from_config(m, cfg, encoder, n_train, max_chunk_elements)
