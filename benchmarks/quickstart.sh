#!/usr/bin/env bash
# Wall time of README command (1) on a fresh clone (install included), written to ring/resources/figures/quickstart-cpu.json.
#   bash benchmarks/quickstart.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
git clone -q "$repo" "$work/ring-bench"
cd "$work/ring-bench"
start=$(date +%s.%N)
bash envs/install.sh && .venv/bin/snakemake --profile profiles/local all_tables > "$work/quickstart.log" 2>&1
end=$(date +%s.%N)
seconds=$(python3 -c "print(round($end - $start, 1))")
cat > "$repo/ring/resources/figures/quickstart-cpu.json" <<JSON
{
  "command": "bash envs/install.sh && .venv/bin/snakemake --profile profiles/local all_tables",
  "fresh_clone": true,
  "wall_s": $seconds,
  "cpu_count": $(nproc),
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
JSON
tail -12 "$work/quickstart.log"
cat "$repo/ring/resources/figures/quickstart-cpu.json"
rm -rf "$work"
