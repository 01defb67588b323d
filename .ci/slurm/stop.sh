#!/usr/bin/env bash
# Stop the single-node SLURM cluster started by .ci/slurm/start.sh.
#
#   bash .ci/slurm/stop.sh            stop daemons, keep state (db, job ids, logs)
#   bash .ci/slurm/stop.sh --purge    also wipe the state dir (db, job state, logs)
#   bash .ci/slurm/stop.sh --user PID the user PID (start.sh --user) leaves: stop
#                                     only if no other live user is left
#
# Daemons are stopped by the PIDs start.sh recorded in $RING_SLURM_STATE/run
# (default /tmp/ring-slurm): SIGTERM, then SIGKILL after
# $RING_SLURM_STOP_TIMEOUT seconds (default 10). A zombie counts as stopped.
# Jobs still queued or running are cancelled first so that their processes do
# not outlive slurmd. Safe to run when nothing is running.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

[ "$(id -u)" = 0 ] || die "must run as root"
purge=0 user=
case ${1:-} in
    --purge) purge=1 ;;
    --user) user=${2:?usage: $0 [--purge | --user PID]} ;;
    "") ;;
    *) die "usage: $0 [--purge | --user PID]" ;;
esac
timeout_s=${RING_SLURM_STOP_TIMEOUT:-10}
take_lock
if [ -n "$user" ]; then
    rm -f "$USERS/$user"
    others=$(live_users | wc -l)
    if ((others)); then
        say "still used by $others other process(es) (start.sh --user); left running"
        exit 0
    fi
fi
t0=$(now)
STOPPED=()

if alive slurmctld && alive slurmd; then
    ids=$(timeout 5 squeue -h -o %A 2>/dev/null || true)
    if [ -n "$ids" ]; then
        # shellcheck disable=SC2086
        timeout 10 scancel $ids 2>/dev/null || true
        for ((i = 0; i < 150; i++)); do
            [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null || true)" ] && break
            sleep 0.1
        done
    fi
fi

for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    stop_daemon "${DAEMONS[i]}" "$timeout_s"
done

if ((${#STOPPED[@]})); then
    say "stopped ${STOPPED[*]} in $(elapsed "$t0")s"
else
    say "nothing was running (state dir $STATE)"
fi
if ((purge)); then
    # Everything but the lock file we hold.
    find "$STATE" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf -- {} +
    say "wiped $STATE"
fi
