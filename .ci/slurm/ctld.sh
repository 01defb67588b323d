#!/usr/bin/env bash
# Stop or start only slurmctld of the cluster started by start.sh (controller-outage tests):
#   bash .ci/slurm/ctld.sh stop     # SIGTERM the controller; jobs keep running under slurmd
#   bash .ci/slurm/ctld.sh start    # start it again from its saved state; waits until the node is schedulable
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"
case ${1:-} in
stop)
    pid=$(pid_of slurmctld)
    pid_running "$pid" || exit 0
    kill -TERM "$pid"
    for _ in $(seq 100); do pid_running "$pid" || exit 0; sleep 0.2; done
    die "slurmctld ($pid) did not stop in 20 s"
    ;;
start)
    pid_running "$(pid_of slurmctld)" && exit 0
    setsid slurmctld -D </dev/null >>"$LOG/slurmctld.log" 2>&1 &
    echo $! >"$RUN/slurmctld.pid"
    # Back means scheduling again: the controller answers and the node has re-registered (until
    # then sbatch --test-only refuses every request as "node configuration is not available").
    for _ in $(seq 300); do
        scontrol ping 2>/dev/null | grep -q UP && sinfo -h -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)' && exit 0
        sleep 0.2
    done
    die "slurmctld did not answer with a schedulable node in 60 s"
    ;;
*) die "usage: ctld.sh stop|start" ;;
esac
