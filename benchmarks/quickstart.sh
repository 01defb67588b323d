#!/usr/bin/env bash
# Wall time of README command (1) on a fresh clone (install included), then of command (3), the report of it,
# written to ring/resources/figures/quickstart-cpu.json (README's "It takes about ..." reads that file).
#   bash benchmarks/quickstart.sh            (RING_QUICKSTART_KEEP=1 keeps the clone and its results, and names it)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
git clone -q "$repo" "$work/ring-bench"
cd "$work/ring-bench"
commit=$(git rev-parse --short HEAD)
now() { date +%s.%N; }
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(now)
bash envs/install.sh > "$work/install.log" 2>&1
t1=$(now)
.venv/bin/snakemake --profile profiles/local all_tables > "$work/quickstart.log" 2>&1
t2=$(now)
.venv/bin/snakemake --profile profiles/local --report report.html all_tables > "$work/report.log" 2>&1
t3=$(now)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
s() { python3 -c "print(round($2 - $1, 1))"; }
cat > "$repo/ring/resources/figures/quickstart-cpu.json" <<JSON
{
  "command": "bash envs/install.sh && .venv/bin/snakemake --profile profiles/local all_tables",
  "report_command": ".venv/bin/snakemake --profile profiles/local --report report.html all_tables",
  "fresh_clone": true,
  "commit": "$commit",
  "wall_s": $(s "$t0" "$t2"),
  "install_s": $(s "$t0" "$t1"),
  "all_tables_s": $(s "$t1" "$t2"),
  "report_s": $(s "$t2" "$t3"),
  "cpu_count": $(nproc),
  "load_average_before": [${load_before// /, }],
  "load_average_after": [${load_after// /, }],
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
JSON
tail -12 "$work/quickstart.log"
cat "$repo/ring/resources/figures/quickstart-cpu.json"
if [ "${RING_QUICKSTART_KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
