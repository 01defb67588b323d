"""ring-bench, in layers (each imports only from its own layer or below; .importlinter, checked by
`lint-imports` in tests/project/test_layers.py):

- stages, on a GPU node: :mod:`ring.pretrain`, :mod:`ring.lincls`, :mod:`ring.transfer` (over lincls),
  :mod:`ring.toy_cnce`, :mod:`ring.prepare` (the prepared store), :mod:`ring.detection` (configs, convert, embedded,
  heads, runner, tasks, train_net); each is ``ring <stage>`` (or ``python -m ring.<stage>``).
- compute (torch): :mod:`ring.engine` (anneal, checkpoint, distributed, encoder, health, knn, logs, objectives,
  provenance, runtime, span_norm: BatchNorm groups across processes) and :mod:`ring.data` (augment, dali, datasets,
  digits: the embedded digits, fetch, gpu_decode: the store's records decoded on the GPU, metadataset: the transfer
  datasets and loaders, store: the prepared store's records and readers, verify: the data check against the
  publisher, views).
- the login-node side, never importing torch: :mod:`ring.cluster` (accounting, batch, detach, jobs, launch,
  progress, run: ``ring run``, slurm) and :mod:`ring.reports` (captions, figures, tables), over :mod:`ring.plan`
  (catalog, checks, decode_place: where the store's records are decoded, detection_tasks, disk, estimate, eta: when
  a grid will end, gate: every command's grid checks, grid, lineage, listings, ownership, reference: the
  configuration reference, rerun, stores: the prepared stores' layout and checks), over :mod:`ring.core` (config,
  failures, files, gaussian: the toy's closed forms, methods: the registry, metrics, sources, stop).

Each package's list names every module in it (tests/project/test_doc_claims.py).

:mod:`ring.cli` is the ``ring`` command: each subcommand calls one of these modules' ``main``.
"""

__version__ = "0.2.0"  # the one place of the version: pyproject.toml reads it (CHANGELOG.md)
