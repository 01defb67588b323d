#!/usr/bin/env bash
# Lose or bring back the second node of the cluster started by start.sh (tests of a cell across nodes):
#   bash .ci/slurm/node.sh fail NODE    # mark NODE down (its jobs end NODE_FAIL), then kill its slurmd
#   bash .ci/slurm/node.sh start NODE   # start its slurmd again; waits until NODE is schedulable
# Only the second node (NODE = <hostname -s>-b, daemon slurmd-b) is managed here.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
node=${2:-}
[ "$node" = "$(hostname -s)-b" ] || die "usage: node.sh fail|start $(hostname -s)-b"
case ${1:-} in
fail)
    # As a lost node looks to the controller: down, its jobs ended NODE_FAIL (and requeued where JobRequeue=1).
    scontrol update nodename="$node" state=down reason="ring test: node lost"
    pid=$(pid_of slurmd-b)
    if pid_running "$pid"; then
        kill -KILL "$pid"
        for _ in $(seq 50); do pid_running "$pid" || break; sleep 0.1; done
    fi
    rm -f "$RUN/slurmd-b.pid"
    ;;
start)
    alive slurmd-b || {
        setsid slurmd -D -N "$node" </dev/null >>"$LOG/slurmd-b.log" 2>&1 9>&- &
        echo $! >"$RUN/slurmd-b.pid"
    }
    for _ in $(seq 300); do
        case $(sinfo -h -N -n "$node" -o %t 2>/dev/null | head -n 1) in
        idle | mix | alloc) exit 0 ;;
        down* | drain* | drng*) scontrol update nodename="$node" state=resume 2>/dev/null || true ;;
        esac
        sleep 0.2
    done
    die "$node did not come back in 60 s"
    ;;
*) die "usage: node.sh fail|start NODE" ;;
esac
