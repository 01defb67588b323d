"""The short summary a failed run ends with: one line per failed job, its cell and its one-sentence reason.

Snakemake's ``onerror`` handler (workflow/rules/common.smk) passes the run's log; each
"Error in rule" block there names the job's outputs and log file, and every stage's last line
starting with ``ring:`` is its reason (the stages print exactly one such sentence when they fail).
Torch-free.
"""

from __future__ import annotations

import re
from pathlib import Path

_FIELD = re.compile(r"^\s+(output|log): (.*?)(?: \(check log file\(s\) for error details\))?$")


def failed_jobs(log_text: str) -> list[dict]:
    """``{rule, output: [...], log: [...]}`` of every "Error in rule" block of a Snakemake log."""
    jobs, job = [], None
    for line in log_text.splitlines():
        start = re.match(r"^Error in rule (\S+):$", line)
        if start:
            job = {"rule": start.group(1), "output": [], "log": []}
            jobs.append(job)
        elif job is not None:
            field = _FIELD.match(line)
            if field:
                job[field.group(1)] = [p.strip() for p in field.group(2).split(",") if p.strip()]
            elif line and not line.startswith(" "):
                job = None
    return jobs


def cell_of(path: str) -> str:
    """``results/<grid>/<stage>/<...>/file`` -> ``<stage> <...>`` (the cell's own words)."""
    parts = Path(path).parts
    if len(parts) >= 4 and parts[0] == "results":
        return f"{parts[2]} {'/'.join(parts[3:-1]) or Path(parts[-1]).stem}"
    return path


def reason(logs: list[str]) -> str:
    """The last ``ring:`` sentence of the job's log files, else where to look."""
    for name in logs:
        path = Path(name)
        if path.is_file():
            lines = [
                line.strip() for line in path.read_text(errors="replace").splitlines() if line.startswith("ring: ")
            ]
            if lines:
                return lines[-1][len("ring: ") :]
    return f"no one-sentence reason recorded; see {', '.join(logs)}" if logs else "see the job's output above"


def summary(log_text: str) -> str:
    jobs = failed_jobs(log_text)
    return report([(job["output"], job["rule"], job["log"]) for job in jobs]) if jobs else ""


def report(jobs: list[tuple[list[str], str, list[str]]]) -> str:
    """The summary of failed jobs given as (outputs, rule, log files): one line each, its cell and its sentence."""
    lines = [f"ring: {len(jobs)} job{'s' if len(jobs) > 1 else ''} failed:"]
    for output, rule, logs in jobs:
        lines.append(f"  {cell_of(output[0]) if output else rule} (rule {rule}): {reason(logs)}")
    return "\n".join(lines)


def run_summary(logs: str | list[str]) -> str:
    """:func:`summary` of a failed run's log files (Snakemake's ``onerror`` passes one path; Snakemake 9 a list)."""
    paths = [Path(p) for p in ([logs] if isinstance(logs, str) else logs)]
    return summary("\n".join(p.read_text(errors="replace") for p in paths if p.is_file()))
