"""Which protocol and which reading of w_l reproduce the appendix's toy table (issue #16).

    python benchmarks/toy_protocols.py --workers 15           # full size, 5 seeds, own critics (~45 s on 16 cores)
    python benchmarks/toy_protocols.py --temperature 0.1      # the same with another critic scale
    python benchmarks/toy_protocols.py --tiny                 # a seconds-long check of the script

Trains the full-size toy (ring.core.config.ToyCNCEConfig defaults, own_critics on) with one more CNCE
percentage, 5, so that both readings of w_l have every column of the paper's table:

* main text (ours): w_l = p draws negatives from the closest (100 - p)% of the bank;
* the appendix's literal "top w_l percent": w_l = p draws them from the closest p%, i.e. our
  percentage 100 - p (w_l = 95 -> our 5, w_l = 10 -> our 90).

and records, per seed and protocol (held-out / training data, NCE's critic / each estimator's own
critic), every estimator, then per paper column the mean and std over seeds and the distance to the
paper's mean in units of the paper's std.  Results: results/toy_protocols[_t<temperature>]-cpu.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine, write  # noqa: E402
from ring.core.config import ToyCNCEConfig, to_dict  # noqa: E402
from ring.reports import tables  # noqa: E402
from ring.toy_cnce import run_seeds  # noqa: E402

PAPER_COLUMNS = [10.0, 25.0, 50.0, 75.0, 90.0, 95.0]
READINGS = {
    "closest (100 - w_l)% (main text, ours)": lambda w: w,
    "closest w_l% (appendix, literal)": lambda w: 100.0 - w,
}


def summarise(results: list[dict]) -> dict:
    out = {}
    protocols = [p for p in ("nce_critic", "own_critics", "nce_critic_train", "own_critics_train") if p in results[0]]
    for protocol in protocols:
        for reading, ours in READINGS.items():
            rows = {}
            for name, w in [("NCE", None)] + [(f"CNCE{w:g}", w) for w in PAPER_COLUMNS]:
                key = "NCE" if w is None else f"CNCE{ours(w):g}"
                values = [r[protocol][key] for r in results]
                mean = statistics.fmean(values)
                std = statistics.stdev(values) if len(values) > 1 else float("nan")
                paper_mean, paper_std = tables.toy_paper(name)
                rows[name] = {
                    "ours_key": key,
                    "mean": mean,
                    "std": std,
                    "paper_mean": paper_mean,
                    "paper_std": paper_std,
                    "paper_stds_away": (mean - paper_mean) / paper_std,
                }
            out[f"{protocol} | {reading}"] = rows
    return out


# One job per (seed, group of CNCE percentages): each trains its seed's NCE critic and the group's own
# critics (a seed's numbers do not depend on what shares its stack, tests/test_toy_cnce.py), so the
# 5 seeds x 3 groups run side by side on 15 cores in ~40 s each.
GROUPS = ([5.0, 10.0, 25.0], [50.0, 75.0], [90.0, 95.0])


def job(args) -> dict:
    seed, percentages, overrides = args
    start = time.perf_counter()
    cfg = ToyCNCEConfig(**{**overrides, "percentages": percentages, "own_critics": True, "threads": 1})
    result = run_seeds(cfg, [seed])[0]
    return {"seed": seed, "result": result, "seconds": time.perf_counter() - start}


def merge(jobs: list[dict]) -> list[dict]:
    """One metrics dict per seed from its groups' jobs (NCE, trained in every group, from the first)."""
    seeds = {}
    for j in jobs:
        merged = seeds.setdefault(j["seed"], {"seed": j["seed"], "true_mi": j["result"]["true_mi"]})
        for protocol in ("nce_critic", "own_critics", "nce_critic_train", "own_critics_train"):
            for name, value in j["result"][protocol].items():
                merged.setdefault(protocol, {}).setdefault(name, value)
    return [seeds[s] for s in sorted(seeds)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--workers", type=int, default=1, help="processes side by side (one job per seed and group)")
    parser.add_argument("--temperature", type=float, default=ToyCNCEConfig().temperature)
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run (tests)")
    args = parser.parse_args(argv)
    overrides = {"temperature": args.temperature}
    if args.tiny:
        overrides.update(n_points=256, epochs=2, batch_size=64, negatives=20, eval_points=500)
    tasks = [(seed, group, overrides) for seed in args.seeds for group in GROUPS]
    start = time.perf_counter()
    if args.workers > 1:
        with multiprocessing.Pool(args.workers) as pool:
            jobs = pool.map(job, tasks, chunksize=1)
    else:
        jobs = [job(t) for t in tasks]
    results = merge(jobs)
    payload = {
        "machine": machine(),
        "config": to_dict(ToyCNCEConfig(**overrides, own_critics=True)),
        "seeds": args.seeds,
        "seconds": time.perf_counter() - start,
        "job_seconds_max": max(j["seconds"] for j in jobs),
        "per_seed": results,
        "summary": summarise(results),
    }
    suffix = "" if args.temperature == ToyCNCEConfig().temperature else f"_t{args.temperature:g}"
    write(f"toy_protocols{suffix}", payload, args.tiny)
    return 0


if __name__ == "__main__":
    sys.exit(main())
