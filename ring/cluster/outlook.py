"""When a grid will end, as JSON, for the gpu_hours table: the lines ``ring status`` ends with, computed by its code.

    python -m ring.cluster.outlook --grid smoke | python -m ring.reports.tables gpu_hours --out ... --outlook -

The lines (per stage and for the grid: cells done, running and pending, GPU-hours spent and left, the time left) are
:func:`ring.cluster.batch.status`'s cells through :func:`ring.cluster.batch.outlook` (ring.plan.eta's arithmetic),
with the same config files as ``ring status``.  The tables (ring.reports, a layer beside this one) never import the
cluster's code: they read this JSON, ``{"grid": ..., "when": ..., "lines": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import jsonschema

from ring import resources
from ring.cluster import batch
from ring.plan import gate


def outlook(grid: str, results: Path, grids_dir: Path = resources.GRIDS, configfiles: list[Path] | None = None) -> dict:
    """``ring status --grid GRID``'s outlook lines, with the time they were computed (UTC)."""
    config = batch.load_config(configfiles or batch.default_configs())
    opened = gate.open_grid(grid, grids_dir, results)
    rows = batch.status(opened, results, config)
    lines = batch.outlook(opened, results, config, rows, batch.load_figures_or_none()).lines(opened.name)
    return {"grid": opened.name, "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "lines": lines}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="When a grid will end, as `ring status` says it, as JSON.")
    parser.add_argument("--grid", required=True, help="a grid's name (ring/resources/grids/NAME.yaml) or its file")
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--grids-dir", type=Path, default=resources.GRIDS)
    parser.add_argument("--configfile", nargs="+", type=Path, help="default: `ring status`'s files")
    args = parser.parse_args(argv)
    try:
        print(json.dumps(outlook(args.grid, args.results, args.grids_dir, args.configfile)))
    except (ValueError, RuntimeError, jsonschema.ValidationError) as err:
        print(f"ring: {getattr(err, 'message', err)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
