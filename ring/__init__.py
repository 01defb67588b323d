"""ring-bench, in layers (each imports only from its own layer or below; .importlinter, checked by
`lint-imports` in tests/project/test_layers.py):

- stages, on a GPU node: :mod:`ring.pretrain`, :mod:`ring.lincls`, :mod:`ring.transfer` (over lincls),
  :mod:`ring.toy_cnce`, :mod:`ring.detection`; each is ``ring <stage>`` (or ``python -m ring.<stage>``).
- compute (torch): :mod:`ring.engine` (encoder, objectives, anneal, runtime, logs, distributed, span_norm,
  checkpoint, health, knn, provenance) and :mod:`ring.data` (datasets, the transfer loaders, fetch, augment, views,
  DALI, the data check against the publisher).
- the login-node side, never importing torch: :mod:`ring.cluster` (launch, jobs, batch, accounting,
  progress) and :mod:`ring.reports` (tables, figures), over :mod:`ring.plan` (plan checks, dataset
  catalog and listings, grid, estimate, rerun, lineage, the configuration reference), over
  :mod:`ring.core` (config, the method registry, files, failures, the stop request, metrics checks,
  the toy's Gaussian closed forms).

:mod:`ring.cli` is the ``ring`` command: each subcommand calls one of these modules' ``main``.
"""

__version__ = "0.2.0"  # the one place of the version: pyproject.toml reads it (CHANGELOG.md)
