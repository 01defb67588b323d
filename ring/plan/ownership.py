"""One grid file, one results folder: ``results/<name>/`` belongs to the grid file that first ran into it.

A grid's results folder is named by its file's stem, so two files of the same name in different folders would share
``results/<name>/`` and rerun each other's cells (each sees the other's cells as edits).  The first run that writes
there records its grid file (:data:`MARKER`); a plan from another file of that name is refused with one sentence,
unless its content is the same (the same cells: sharing them loses nothing).  A folder from before the marker
existed is attributed by its jobs' provenance records (``grid_file``, ring.engine.provenance).  Torch-free: the plan
and ``ring submit`` ask it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ring.core.files import sha256_file, write_json

MARKER = "grid-file.json"  # in results/<name>/: {"path": the grid file's absolute path, "sha256": its content's}
# Where a job's provenance.json lies in a results folder: <stage>/<dataset>/<method>/seed<N>/.
PROVENANCE_GLOB = "*/*/*/seed*/provenance.json"


def _sha(path: Path) -> str | None:
    return sha256_file(path) if path.is_file() else None


def _read(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def recorded_owner(folder: Path) -> dict | None:
    """The grid file ``{"path", "sha256"}`` that made ``folder``: its marker's, else the first provenance record's."""
    marker = _read(folder / MARKER)
    if marker and marker.get("path"):
        return marker
    for record in folder.glob(PROVENANCE_GLOB):  # lazily: the first record that names a grid file decides
        owner = (_read(record) or {}).get("grid_file")
        # A grid file that is gone no longer claims the folder through its jobs' records: it was moved (the
        # refusal's advice, deleting the marker, then lets the moved file claim it) or deleted.
        if isinstance(owner, dict) and owner.get("path") and Path(owner["path"]).is_file():
            return owner
    return None


def conflict(grid_file: str | Path, folder: str | Path) -> str | None:
    """Why ``grid_file`` may not run into ``folder`` (one sentence), or None."""
    mine, folder = Path(grid_file).resolve(), Path(folder)
    owner = recorded_owner(folder)
    if owner is None or Path(owner["path"]) == mine:
        return None
    theirs = Path(owner["path"])
    if _sha(mine) in {owner.get("sha256"), _sha(theirs)}:
        return None  # the same content: the same cells
    return (
        f"The results folder {folder} holds the cells of grid file {theirs}, not of {mine}, a different file of "
        f"the same name whose run would share and rerun them; rename {mine.name} (its name names the results "
        f"folder), or delete {folder / MARKER} if {theirs} was moved to {mine}."
    )


def claim(grid_file: str | Path, folder: str | Path) -> None:
    """Record ``grid_file`` as the maker of ``folder`` (after :func:`conflict` found none); a file of the same content
    leaves the first one recorded."""
    mine, folder = Path(grid_file).resolve(), Path(folder)
    owner = recorded_owner(folder)
    if owner is not None and Path(owner["path"]) != mine and (folder / MARKER).is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / MARKER, {"path": str(mine), "sha256": _sha(mine)})
