#!/usr/bin/env bash
# Start a real single-node SLURM cluster (munge, MariaDB, slurmdbd, slurmctld,
# slurmd) for ring's tests and CI. Debian 12, run as root.
#
#   bash .ci/slurm/start.sh      # ~10 s once packages are installed
#   bash .ci/slurm/stop.sh       # stop it (add --purge to wipe state)
#
#   bash .ci/slurm/start.sh --user PID   # ... and register process PID as a
#                                        # user: stop.sh --user PID stops the
#                                        # cluster only when no other live user
#                                        # is left (tests on several workers)
#
# - Installs missing Debian packages (quietly; no-op when present).
# - Writes /etc/slurm/{slurm,slurmdbd,gres}.conf from the *.in templates next
#   to this script. Clients need no SLURM_CONF: the default path is used
#   because snakemake's SLURM executor strips SLURM_CONF from nested calls.
#   A pre-existing foreign config is kept once as <file>.ring-orig.
# - Runtime state (pids, logs, munge key+socket, MariaDB datadir, slurmctld
#   state, slurmd spool, fake GPU devices) lives in $RING_SLURM_STATE
#   (default /tmp/ring-slurm) and survives stop.sh, so job ids keep growing.
# - Cluster "ring", partition "gpu" (default, MaxTime=UNLIMITED), node
#   $(hostname -s) with CPUs=$(nproc), two fake GPUs, account "ring" (root's
#   default), AccountingStorageEnforce=associations.
# - A second node, $(hostname -s)-b: another slurmd on this machine (slurmd -N,
#   its own port, spool and two fake GPUs; SLURM built with multiple-slurmd
#   support, as Debian 12's 22.05 is), in partition "multi" with the first:
#   the tests of one cell across two nodes.
# - Re-runnable: if everything is already up with the same config it does
#   nothing; otherwise it stops what is left (stop.sh) and starts cleanly.
#   Concurrent callers are serialised by a lock in the state dir (taken before
#   the packages are installed): the first starts the cluster, the others find
#   it up.
#
# Environment (all optional):
#   RING_SLURM_STATE        state dir            (/tmp/ring-slurm)
#   RING_SLURM_TIMEOUT      per-step wait, s     (60)
#   RING_SLURM_DB_PORT      MariaDB, 127.0.0.1   (13306)
#   RING_SLURM_CTLD_PORT    slurmctld            (6817)
#   RING_SLURM_SLURMD_PORT  slurmd               (6818)
#   RING_SLURM_SLURMD2_PORT the second slurmd    (6820)
#   RING_SLURM_DBD_PORT     slurmdbd             (6819)
set -euo pipefail
t0=$(date +%s.%N)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

[ "$(id -u)" = 0 ] || die "must run as root"
user=
case ${1:-} in
    --user) user=${2:?usage: $0 [--user PID]} ;;
    "") ;;
    *) die "usage: $0 [--user PID]" ;;
esac
wait_s=${RING_SLURM_TIMEOUT:-60}
CLUSTER=ring
ACCOUNT=ring
DB_PORT=${RING_SLURM_DB_PORT:-13306}
CTLD_PORT=${RING_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${RING_SLURM_SLURMD_PORT:-6818}
SLURMD2_PORT=${RING_SLURM_SLURMD2_PORT:-6820}
DBD_PORT=${RING_SLURM_DBD_PORT:-6819}
MUNGE_SOCKET=$STATE/munge/munge.socket
DB_SOCKET=$RUN/mysqld.sock

# --- packages -------------------------------------------------------------
install_packages() {
    local pkgs=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
    local missing=() p policy_created=0 rc=0
    for p in "${pkgs[@]}"; do
        [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    say "installing ${missing[*]} (apt-get, quiet)"
    # Keep the packages' init scripts from starting system-wide daemons.
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_created=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    {
        apt-get update -qq &&
            apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}"
    } >"/tmp/ring-slurm-apt.log" 2>&1 || rc=$?
    ((policy_created)) && rm -f /usr/sbin/policy-rc.d
    if ((rc)); then
        tail -n 20 /tmp/ring-slurm-apt.log >&2
        die "apt-get failed (full log: /tmp/ring-slurm-apt.log)"
    fi
}

# --- configs --------------------------------------------------------------
HOST=$(hostname -s)
HOST2=$HOST-b # the second node's name (slurmd -N); same machine, same address
# The machine's CPUs, not this shell's OpenMP share: GNU nproc honours OMP_NUM_THREADS, which each pytest-xdist
# worker sets to 1 (tests/conftest.py), and a 1-CPU node refuses the two-task jobs.
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
# A bit under the machine's memory so slurmd never finds "less than configured".
MEM=$(awk '/^MemTotal:/ { m = int($2 / 1024 * 0.95); print (m > 1 ? m : 1) }' /proc/meminfo)

render() { # template -> stdout
    sed -e "s|@MARKER@|$MARKER|g" -e "s|@STATE@|$STATE|g" -e "s|@HOST@|$HOST|g" -e "s|@HOST2@|$HOST2|g" \
        -e "s|@CLUSTER@|$CLUSTER|g" -e "s|@CPUS@|$CPUS|g" -e "s|@MEM@|$MEM|g" \
        -e "s|@MUNGE_SOCKET@|$MUNGE_SOCKET|g" -e "s|@DB_PORT@|$DB_PORT|g" \
        -e "s|@DB_PASS@|${DB_PASS:-}|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" \
        -e "s|@SLURMD_PORT@|$SLURMD_PORT|g" -e "s|@DBD_PORT@|$DBD_PORT|g" \
        -e "s|@SLURMD2_PORT@|$SLURMD2_PORT|g" "$1"
}

render_all() { # into $STATE/etc
    mkdir -p "$STATE/etc"
    local f
    for f in slurm.conf slurmdbd.conf gres.conf; do
        render "$here/$f.in" >"$STATE/etc/$f"
    done
    chmod 600 "$STATE/etc/slurmdbd.conf" # slurmdbd refuses anything else
}

configs_installed() {
    local f
    for f in slurm.conf slurmdbd.conf gres.conf; do
        cmp -s "$STATE/etc/$f" "$CONF_DIR/$f" || return 1
    done
}

install_configs() {
    mkdir -p "$CONF_DIR"
    local f
    for f in slurm.conf slurmdbd.conf gres.conf; do
        if [ -e "$CONF_DIR/$f" ] && ! grep -qF "$MARKER" "$CONF_DIR/$f" && [ ! -e "$CONF_DIR/$f.ring-orig" ]; then
            cp -p "$CONF_DIR/$f" "$CONF_DIR/$f.ring-orig"
            say "kept the previous $CONF_DIR/$f as $f.ring-orig"
        fi
        install -m "$([ $f = slurmdbd.conf ] && echo 600 || echo 644)" -o root -g root \
            "$STATE/etc/$f" "$CONF_DIR/$f"
    done
}

# --- process helpers ------------------------------------------------------
# launch NAME CMD...: run CMD in the foreground mode of the daemon, detached
# into its own session, all fds away from the caller (a captured stdout would
# otherwise never close; fd 9 is the state lock), and record its pid.
launch() {
    local name=$1
    shift
    setsid "$@" </dev/null >>"$LOG/$name.log" 2>&1 9>&- &
    echo $! >"$RUN/$name.pid"
}

fail() { # fail NAME MESSAGE: print the daemon's logs and give up
    local name=$1 f
    shift
    for f in "$LOG/$name".*; do
        [ -s "$f" ] || continue
        echo "---- tail of $f" >&2
        tail -n 25 "$f" >&2
    done
    die "$*"
}

# wait_for NAME WHAT CMD...: poll CMD until it succeeds; fail early if the
# daemon NAME died, or after $wait_s seconds.
wait_for() {
    local name=$1 what=$2 deadline
    shift 2
    deadline=$(($(date +%s) + wait_s))
    until "$@" >/dev/null 2>&1; do
        pid_running "$(pid_of "$name")" || fail "$name" "$name exited while waiting for $what"
        (($(date +%s) < deadline)) || fail "$name" "timed out after ${wait_s}s waiting for $what"
        sleep 0.2
    done
}

ctld_up() { [[ $(timeout 5 scontrol ping 2>/dev/null) == *"is UP"* ]]; }
sacct_answers() { timeout 10 sacct -n -X -S now-1minutes -o JobID >/dev/null 2>&1; }
node_state() { timeout 5 sinfo -h -N -n "${1:-$HOST}" -o %t 2>/dev/null | head -n 1; }
node_idle() { # node_idle [NODE]
    local s node=${1:-$HOST}
    s=$(node_state "$node")
    case $s in
        idle) return 0 ;;
        drain* | drng* | down*) # left drained or down by an earlier run (a kill that failed, a killed slurmd)
            timeout 5 scontrol update nodename="$node" state=resume >>"$LOG/start.log" 2>&1 || true ;;
    esac
    return 1
}
multiple_slurmd() { [[ $(timeout 5 scontrol show config 2>/dev/null) =~ MULTIPLE_SLURMD[[:space:]]*=[[:space:]]*Yes ]]; }
munge_works() { munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET"; }
db_ping() { mariadb-admin --no-defaults -S "$DB_SOCKET" -uroot --connect-timeout=2 ping; }
dbd_answers() { timeout 10 sacctmgr -n -P list cluster format=cluster; }
sql() { mariadb --no-defaults -S "$DB_SOCKET" -uroot -N -B -e "$1"; }

all_alive() {
    local d
    for d in "${DAEMONS[@]}"; do alive "$d" || return 1; done
}

# --- main -----------------------------------------------------------------
take_lock
install_packages
mkdir -p "$STATE" "$RUN" "$LOG"
[ -r "$STATE/db.pass" ] && DB_PASS=$(cat "$STATE/db.pass")
render_all

if all_alive && configs_installed && ctld_up && sacct_answers && [[ $(node_state "$HOST2") =~ ^(idle|mix|alloc|comp) ]]; then
    case $(node_state) in
        idle | mix | alloc | comp*)
            say "already running (state dir $STATE); nothing to do"
            [ -z "$user" ] || add_user "$user"
            exit 0
            ;;
    esac
fi
for d in "${DAEMONS[@]}"; do
    if alive "$d"; then
        say "partial or outdated cluster found; restarting it"
        bash "$here/stop.sh"
        break
    fi
done

mkdir -p "$STATE/ctld" "$STATE/slurmd/$HOST" "$STATE/slurmd/$HOST2" "$STATE/dev"
install -d -m 755 "$STATE/munge" # key is 0600; clients need x on the dir
rm -f "$RUN"/*.pid "$RUN"/*.daemon.pid "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock" "$DB_SOCKET"
for d in start "${DAEMONS[@]}"; do : >"$LOG/$d.log"; done # logs of this run only
# Fake GPUs: slurm wants character devices; symlinks to /dev/null pass.
ln -sfn /dev/null "$STATE/dev/gpu0"
ln -sfn /dev/null "$STATE/dev/gpu1"
ln -sfn /dev/null "$STATE/dev/gpu2"
ln -sfn /dev/null "$STATE/dev/gpu3"

# munge: private key and socket.
if [ ! -s "$STATE/munge/munge.key" ]; then
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 600 "$STATE/munge/munge.key"
launch munged munged --foreground --force --key-file="$STATE/munge/munge.key" \
    --socket="$MUNGE_SOCKET" --pid-file="$RUN/munged.daemon.pid" \
    --log-file="$LOG/munged.log" --seed-file="$STATE/munge/munged.seed"
wait_for munged "munge" munge_works

# MariaDB on loopback only, private datadir.
if [ ! -d "$STATE/mysql/mysql" ] || [ ! -s "$STATE/db.pass" ]; then
    rm -rf "$STATE/mysql"
    mariadb-install-db --no-defaults --user=root --datadir="$STATE/mysql" \
        --auth-root-authentication-method=socket --skip-test-db \
        >"$LOG/mariadb-install-db.log" 2>&1 || fail mariadbd "mariadb-install-db failed"
    DB_PASS=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
    (umask 077 && echo "$DB_PASS" >"$STATE/db.pass")
    new_db=1
fi
launch mariadbd mariadbd --no-defaults --user=root --datadir="$STATE/mysql" \
    --socket="$DB_SOCKET" --pid-file="$RUN/mysqld.daemon.pid" \
    --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
    --log-error="$LOG/mariadbd.log" --skip-log-bin \
    --innodb-buffer-pool-size=512M --innodb-log-file-size=64M \
    --innodb-lock-wait-timeout=900 --innodb-flush-log-at-trx-commit=2
wait_for mariadbd "MariaDB" db_ping
if [ "${new_db:-0}" = 1 ]; then
    sql "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
         CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
         GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
fi

# Configs (slurmdbd.conf carries the db password, hence rendered again).
render_all
install_configs

launch slurmdbd slurmdbd -D
wait_for slurmdbd "slurmdbd" dbd_answers

# Accounting objects: cluster, account "ring", root in it (default).
listed() { grep -qx "$1" <<<"$2"; } # (no pipe: pipefail + grep -q can misfire)
if ! listed "$CLUSTER" "$(timeout 10 sacctmgr -n -P list cluster format=cluster)"; then
    timeout 20 sacctmgr -i -Q add cluster "$CLUSTER" >>"$LOG/start.log" 2>&1 ||
        fail slurmdbd "sacctmgr add cluster failed"
fi
if ! listed "$ACCOUNT" "$(timeout 10 sacctmgr -n -P list account "$ACCOUNT" format=account)"; then
    timeout 20 sacctmgr -i -Q add account "$ACCOUNT" cluster="$CLUSTER" \
        description="ring tests" organization=ring >>"$LOG/start.log" 2>&1 ||
        fail slurmdbd "sacctmgr add account failed"
fi
if ! listed root "$(timeout 10 sacctmgr -n -P list assoc cluster="$CLUSTER" account="$ACCOUNT" user=root format=user)"; then
    timeout 20 sacctmgr -i -Q add user root account="$ACCOUNT" cluster="$CLUSTER" \
        >>"$LOG/start.log" 2>&1 || fail slurmdbd "sacctmgr add user failed"
fi
if [ "$(timeout 10 sacctmgr -n -P list user root format=defaultaccount)" != "$ACCOUNT" ]; then
    timeout 20 sacctmgr -i -Q modify user root set defaultaccount="$ACCOUNT" \
        >>"$LOG/start.log" 2>&1 || fail slurmdbd "sacctmgr modify user failed"
fi

launch slurmctld slurmctld -D
wait_for slurmctld "scontrol ping UP" ctld_up
if ! multiple_slurmd; then
    bash "$here/stop.sh"
    die "this SLURM's slurmd was built without multiple-slurmd support (scontrol show config: MULTIPLE_SLURMD is not Yes), which the test cluster's second node needs; install Debian 12's slurmd 22.05 or a build configured with --enable-multiple-slurmd"
fi

# Only now: a slurmd started before the controller answers ignores SIGTERM.
launch slurmd slurmd -D -N "$HOST"
wait_for slurmd "node $HOST idle (sinfo)" node_idle
launch slurmd-b slurmd -D -N "$HOST2"
wait_for slurmd-b "node $HOST2 idle (sinfo)" node_idle "$HOST2"
wait_for slurmdbd "sacct" sacct_answers

for d in "${DAEMONS[@]}"; do
    alive "$d" || fail "$d" "$d is not running after start"
done
[ -z "$user" ] || add_user "$user"
say "cluster '$CLUSTER' up in $(elapsed "$t0")s: node $HOST (cpus=$CPUS mem=${MEM}M gpu:2), partition gpu, account $ACCOUNT"
say "second node $HOST2 (slurmd port $SLURMD2_PORT, gpu:2), partition multi = $HOST,$HOST2"
say "config $CONF_DIR/slurm.conf, state $STATE, logs $LOG"
