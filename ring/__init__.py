"""ring-bench, in layers (each imports only from its own layer or below; .importlinter, checked by
`lint-imports` in tests/project/test_layers.py):

- stages, on a GPU node: :mod:`ring.pretrain`, :mod:`ring.lincls`, :mod:`ring.transfer` (over lincls),
  :mod:`ring.toy_cnce`, :mod:`ring.prepare` (the prepared store), :mod:`ring.detection` (configs, convert, embedded,
  heads, runner, train_net); each is ``ring <stage>`` (or ``python -m ring.<stage>``); and :mod:`ring.fetch`,
  ``ring fetch`` (a grid's datasets); below them :mod:`ring.monitor`, a pretraining cell's kNN monitors.
- the login-node side, never importing torch: :mod:`ring.cluster` (admission: whether SLURM admits a stage's resources,
  batch, cells: a grid's cells as SLURM and the workflow see them, detach, jobs, launch, outlook: a grid's end as JSON
  for the gpu_hours table, progress, prune: ``ring prune``, slurm, watch: following a job until it ends, workflow:
  ``ring run``) and :mod:`ring.reports` (captions, figures, tables),
  over :mod:`ring.plan` (checks: a config's and a grid's, detection_tasks, disk, estimate, eta: when a grid will end,
  gate: every command's grid checks, grid, lineage, ownership, reference: the configuration reference, rerun:
  ``ring rerun`` by hand, rules: the workflow's rule registries and light commands, targets: a run's targets),
  which checks configs against what the compute side declares it implements.
- compute (torch), taking everything from its caller and the ground floor, never from the plan: :mod:`ring.engine`
  (anneal: the Ring window's schedule, anneal_authors: the authors' annealing policies, anneal_policies: the
  appendix's, checkpoint, clock: the seconds each pass of a cell spends, distributed, encoder, grouped_bn: BatchNorm
  groups in one pass, groups: the processes' batch and BatchNorm layout, health, knn, knn_schedule: when the kNN
  monitor runs, logs, objectives, pretrain_state: a pretraining cell's checkpoint and snapshots,
  provenance, runtime, span_norm: BatchNorm groups across processes) and :mod:`ring.data` (augment, bilinear: PIL's
  resampling as matrices, dali, datasets,
  decode_place: where the store's records are decoded, digits: the embedded digits, download: a dataset from its
  publisher, eval_views: evaluation's views made on the device from a store, fetch_recipes: what download gets for
  each dataset, folders: the data check of a
  dataset folder, gpu_decode: the store's records decoded on the GPU, hsv: PIL's HSV and hue tables, listings: the
  transfer datasets' splits, metadataset: the transfer datasets and loaders, store: the prepared store's records and
  readers, store_layout: its layout and checks, verify: the data check against the publisher, view_draws: a batch's
  view parameters from Philox, views); their option lists and the torch-free modules (folders, listings,
  store_layout, verify, download, anneal, groups) are what the plan reads of them.
- the ground floor, torch-free: :mod:`ring.core` (accounting: SLURM's record of a cell's runs, catalog: the datasets'
  sizes; norms and layouts, config, failures, files, gaussian: the toy's closed forms, key_declaration: how a key and
  a group of keys are declared, method_keys: the keys only some methods read, methods: the methods and their lookups,
  metrics, objective_settings: what an objective is built from, plugin_child, plugins: the registry that loads the
  plug-ins at its first read and tries each in a child process first, cell_runs: what an edited config does to a
  cell's files, cell_paths: the cell folders' layout, refs: code named by "module:name" and resolved where it runs,
  sources, stages: each stage declared once, stop, yaml_reading: the one YAML reader).

Each package's list names every module in it (tests/project/test_doc_claims.py).

:mod:`ring.cli` is the ``ring`` command: each subcommand calls one of these modules' ``main``.
"""

__version__ = "0.4.0"  # the one place of the version: pyproject.toml reads it (CHANGELOG.md)
