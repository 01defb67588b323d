"""Data on the compute side: datasets, the transfer loaders, fetch, augment, DALI, the data check
against the publisher; and published-results.yaml (package data).

The torch-free modules (folders: the data check of a dataset folder, listings: the transfer datasets' splits, stores:
the prepared store's layout, verify, fetch) are read by the plan and the workflow client too.  The data side's option
lists are declared here, beside the modules that implement them and torch-free (the plan's checks read them).
"""

AUGMENT_PLACES = ("auto", "cpu", "device", "dali")  # where ring.data.augment (or ring.data.dali) makes the views
# How the pretraining views' random values are drawn: per sample in the workers, or per batch (ring.data.view_draws).
VIEW_DRAWS = ("sample", "batch")
AUGMENTATIONS = ("crop_flip", "none")  # linear evaluation's views (ring.data.datasets.linear_view)
