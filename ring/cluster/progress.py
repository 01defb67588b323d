"""Where a locally launched cell stands, read from its folder (torch-free: ``ring status`` imports it).

The local launcher (``ring.cluster.launch --launcher local``) wraps the stage in :func:`running`, which keeps
``CELL/running.json`` while the stage runs::

    {"state": "running", "pid": PID, "host": HOSTNAME, "started": ISO-8601 UTC}

and on a failure rewrites it as ``{"state": "failed", ..., "error": "exit status 1" | "<exception>"}``;
a stage that finishes removes it.  A ``running`` marker whose process is gone (killed, node lost) is
a failed cell.  Progress (epoch, last kNN accuracy) comes from the cell's ``log.jsonl``.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ring.core.files import write_json
from ring.core.yaml_reading import read_yaml

MARKER = "running.json"
LOG = "log.jsonl"
TAIL_BYTES = 1 << 16  # the log's last lines; a 300-epoch log is read in one small read


@contextmanager
def running(cell: Path):
    """Mark ``cell`` as run by this process while the body runs; a non-zero ``status`` set on the
    yielded dict, or an exception, leaves it marked failed."""
    cell.mkdir(parents=True, exist_ok=True)
    marker = cell / MARKER
    record = {
        "state": "running",
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    _write(marker, record)
    result = {"status": 0}
    try:
        yield result
    except BaseException as err:
        _write(marker, {**record, "state": "failed", "error": f"{type(err).__name__}: {err}"[:300]})
        raise
    if result["status"]:
        _write(marker, {**record, "state": "failed", "error": f"exit status {result['status']}"})
    else:
        marker.unlink(missing_ok=True)


def _write(path: Path, record: dict) -> None:
    write_json(path, record, indent=None)


def alive(record: dict) -> bool | None:
    """Whether the marker's process still runs; None when it runs on another host (unknowable here)."""
    if record.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def last_records(log: Path) -> list[dict]:
    """The complete JSON lines at the end of ``log`` (a line being written is skipped)."""
    try:
        with open(log, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return []
    if size > TAIL_BYTES:
        lines = lines[1:]  # cut by the seek
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def progress(cell: Path) -> str:
    """``epoch E/N, kNN K%`` from the cell's log and config ('' before the first epoch ends)."""
    records = last_records(cell / LOG)
    if not records:
        return ""
    text = f"epoch {records[-1].get('epoch', -1) + 1}"
    try:
        epochs = read_yaml(cell / "config.yaml", "Cell config").get("epochs")
        text += f"/{epochs}" if epochs else ""
    except (OSError, ValueError, AttributeError):
        pass
    knn = [r["knn_top1"] for r in records if isinstance(r.get("knn_top1"), (int, float))]
    return text + (f", kNN {knn[-1]:.2f}%" if knn else "")


def local_state(cell: Path) -> tuple[str, str]:
    """(state, detail) of a cell without a finished output or a SLURM record."""
    marker = cell / MARKER
    if marker.exists():
        try:
            record = json.loads(marker.read_text())
        except (OSError, ValueError):
            record = {}
        where = f"pid {record.get('pid')} on {record.get('host')}"
        done = progress(cell)
        if record.get("state") == "failed":
            return "failed", f"{where}: {record.get('error', '')}" + (f" ({done})" if done else "")
        if alive(record) is False:
            return "failed", f"{where} is gone" + (f" ({done})" if done else "")
        return "running", ", ".join(filter(None, [done, where]))
    if (cell / LOG).exists():
        return "failed", "stopped, no process runs it" + (f" ({progress(cell)})" if progress(cell) else "")
    if (cell / "config.yaml").exists():
        return "pending", "configured, not started"
    return "missing", ""


PROGRESS = "progress.json"  # ring.engine.provenance.PROGRESS: the running segment's rate, rank 0 each epoch


def running_segment(cell: Path) -> tuple[float, float | None]:
    """(GPU-hours the running segment has spent, wall hours it still needs at its measured rate or None) from the
    cell's ``progress.json``; (0, None) before its first epoch ends."""
    try:
        record = json.loads((cell / PROGRESS).read_text())
        wall_s, epochs_done = float(record["segment_wall_s"]), float(record["segment_epochs"])
        spent = wall_s * int(record["gpus"]) / 3600.0  # as provenance counts them: none on a CPU
        remaining = float(record["epochs"]) - float(record["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0, None
    if epochs_done <= 0 or wall_s <= 0:
        return spent, None
    return spent, remaining * wall_s / epochs_done / 3600.0
