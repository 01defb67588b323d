"""When a pretraining cell's kNN monitor runs (torch-free: the plan prices it, the job follows it).

The monitor embeds every labelled training and test image with the training network: a forward pass over
``n_train + n_test`` images with no backward, no second view and no augmentation.  Per epoch of pretraining that is
about a fifth of the epoch's compute on CIFAR and STL (two views, forward and backward), and on ImageNet, whose
images were decoded and cropped on the CPU for it (now only decoded there: ring.data.eval_views crops on the device),
about a third of an epoch (an audit: 69-164 H200-hours
over the paper grid at ``knn_every: 10``).  ``auto`` keeps the monitor within 5% of its cell:

* datasets read from image folders (ImageNet, the catalog's ``store_size``): the last epoch only; the paper
  reports no ImageNet kNN, and the last epoch's accuracy is what a curve's end would show;
* in-memory datasets (CIFAR, STL, digits): every :data:`AUTO_EVERY` epochs and the last (about 2%).

What a curve loses: the epochs in between (a CIFAR curve has 31 points of 300 instead of 300; ImageNet's one).
The monitor never changes training (``tests/engine/test_knn_schedule.py`` trains with and without it and compares the
encoders bit for bit), so the schedule is left out of the config hash (``ring.core.config.PretrainConfig``).
"""

from __future__ import annotations

KNN_SCHEDULES = ("auto", "every", "last", "never")
AUTO_EVERY = 10  # an in-memory dataset's monitor period under "auto"


def knn_epochs(schedule: str, knn_every: int, epochs: int, image_folders: bool) -> list[int]:
    """The epochs (from 0) at whose end the monitor runs.

    ``every``: every ``knn_every`` epochs and the last (the earlier schedule; ``knn_every`` 0: never);
    ``last``: the last epoch; ``never``; ``auto``: ``last`` for image-folder datasets, else every :data:`AUTO_EVERY`,
    and never where ``knn_every`` is 0 (a cell that turned its monitor off keeps it off).
    """
    if schedule not in KNN_SCHEDULES:
        raise ValueError(f"knn_schedule={schedule!r} is not one of {', '.join(KNN_SCHEDULES)}; set one of them.")
    if schedule == "auto" and knn_every > 0:
        schedule, knn_every = ("last", 0) if image_folders else ("every", AUTO_EVERY)
    if schedule == "never" or epochs < 1 or (schedule in ("every", "auto") and knn_every <= 0):
        return []
    if schedule == "last":
        return [epochs - 1]
    return [e for e in range(epochs) if (e + 1) % knn_every == 0 or e == epochs - 1]
