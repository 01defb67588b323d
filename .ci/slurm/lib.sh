# shellcheck shell=bash disable=SC2034  # variables are used by the scripts that source this
# Shared by start.sh and stop.sh (sourced, not executed).

RING_SLURM_STATE=${RING_SLURM_STATE:-/tmp/ring-slurm}
case $RING_SLURM_STATE in /*) ;; *) RING_SLURM_STATE=$PWD/$RING_SLURM_STATE ;; esac
STATE=$RING_SLURM_STATE
RUN=$STATE/run
LOG=$STATE/log
# Fixed on purpose: snakemake's SLURM executor strips SLURM_CONF from nested
# calls, so every client must find the config at the default location.
CONF_DIR=/etc/slurm
MARKER="managed by ring .ci/slurm/start.sh"

# Start order; stop.sh walks it backwards.  slurmd-b is the second node's slurmd (its process is a slurmd).
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd slurmd-b)

say() { printf 'ring-slurm: %s\n' "$*"; }
die() { printf 'ring-slurm: ERROR: %s\n' "$*" >&2; exit 1; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

pid_of() { [ -r "$RUN/$1.pid" ] && cat "$RUN/$1.pid" 2>/dev/null || true; }

# Single-letter process state (R, S, D, Z, ...) or empty if there is no such process.
proc_state() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    printf '%s' "${stat%% *}"
}

# pid_running PID: the process exists and is not a zombie (zombies linger
# here because nothing reaps re-parented daemons).
pid_running() {
    local s
    [ -n "$1" ] || return 1
    s=$(proc_state "$1")
    [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}

# alive NAME: the recorded pid runs and is still that daemon (guards against
# pid reuse after a reboot or a wiped /proc).
alive() {
    local pid comm
    pid=$(pid_of "$1")
    pid_running "$pid" || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "${1%%-*}" ]
}

# stop_daemon NAME TIMEOUT: SIGTERM, then SIGKILL after TIMEOUT seconds.
stop_daemon() {
    local name=$1 timeout=$2 pid i
    pid=$(pid_of "$name")
    if alive "$name"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < timeout * 10; i++)); do
            pid_running "$pid" || break
            sleep 0.1
        done
        if pid_running "$pid"; then
            say "$name (pid $pid) ignored SIGTERM for ${timeout}s, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                pid_running "$pid" || break
                sleep 0.1
            done
            pid_running "$pid" && die "$name (pid $pid) survives SIGKILL"
        fi
        STOPPED+=("$name")
    fi
    rm -f "$RUN/$name.pid"
}

# take_lock: serialize start.sh/stop.sh runs on one state dir (e.g. parallel
# test workers). start.sh passes its lock on to the stop.sh it calls.  900 s:
# the first start.sh on a fresh machine installs the packages under it.
take_lock() {
    [ "${RING_SLURM_LOCKED:-}" = "$STATE" ] && return 0
    mkdir -p "$STATE"
    exec 9>"$STATE/.lock"
    flock -w 900 9 || die "could not lock $STATE/.lock within 900s"
    export RING_SLURM_LOCKED=$STATE
}

# The processes that use the cluster (start.sh --user PID, e.g. each pytest
# worker), one file each in $USERS holding the process's start time, so that a
# pid reused by another process after a user died is not taken for that user.
# stop.sh --user PID stops the cluster only when the last live user leaves.
USERS=$STATE/users

started_at() { # started_at PID: the process's start time (/proc/PID/stat field 22), empty if none
    local stat fields
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) } # field 3 on: the command name may hold spaces
    read -ra fields <<<"$stat"
    printf '%s' "${fields[19]}"
}

add_user() { # add_user PID (under the lock)
    local since
    since=$(started_at "$1")
    [ -n "$since" ] || die "no process $1 to register as a user of the cluster"
    mkdir -p "$USERS"
    printf '%s\n' "$since" >"$USERS/$1"
}

live_users() { # live_users: the registered users still alive, one pid a line; forgets the dead (under the lock)
    local f pid
    [ -d "$USERS" ] || return 0
    for f in "$USERS"/*; do
        [ -e "$f" ] || continue
        pid=${f##*/}
        if [ "$(started_at "$pid")" = "$(cat "$f" 2>/dev/null)" ]; then echo "$pid"; else rm -f "$f"; fi
    done
}
