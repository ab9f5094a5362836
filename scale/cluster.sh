#!/bin/bash
# A Slurm cluster of one node on this machine, for tests and trying the
# sbatch scripts without a real cluster: munged with a fresh key, slurmctld
# and slurmd, everything (key, slurm.conf, state, logs) in one directory.
#   scale/cluster.sh start DIR   start it; prints the line to source:
#                                export SLURM_CONF=DIR/slurm.conf
#   scale/cluster.sh stop DIR    stop it (also after a failed start)
# Runs as root (slurmd starts jobs as their user). Ports: JPT_SLURM_PORT
# (slurmctld) and the next one (slurmd), default 6917.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# Whether pid runs (a zombie does not).
alive() {
    local st
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

stop() {
    local d=$1
    if [ -f "$d/slurm.conf" ]; then
        SLURM_CONF=$d/slurm.conf timeout 10 scontrol shutdown >/dev/null 2>&1 || true
    fi
    # Whatever did not go by itself, by its pid file: TERM after 5 s
    # (munged at once), KILL after 10.
    for f in slurmctld slurmd munged; do
        local pidf=$d/$f.pid
        [ -s "$pidf" ] || continue
        local pid
        pid=$(cat "$pidf")
        [ "$f" = munged ] && kill "$pid" 2>/dev/null
        for i in $(seq 50); do
            alive "$pid" || break
            [ "$i" = 25 ] && kill "$pid" 2>/dev/null
            sleep 0.2
        done
        alive "$pid" && kill -9 "$pid" 2>/dev/null
        rm -f "$pidf"
    done
}

case $cmd in
stop)
    stop "$dir"
    exit 0
    ;;
start) ;;
*) usage ;;
esac

for tool in munged slurmctld slurmd sbatch scontrol sinfo; do
    command -v "$tool" >/dev/null || {
        echo "cluster: $tool not found: install Debian's slurm-wlm and munge" >&2
        exit 1
    }
done
[ "$(id -u)" = 0 ] || { echo "cluster: run as root (slurmd starts jobs as their user)" >&2; exit 1; }

mkdir -p "$dir/state" "$dir/spool" "$dir/munge" "$dir/log"
dir=$(cd "$dir" && pwd)
chmod 700 "$dir/munge"
# A key of our own: munged refuses one that others can read.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
port=${JPT_SLURM_PORT:-6917}
node=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
cat > "$dir/slurm.conf" <<CONF
# Written by scale/cluster.sh: a single-node cluster in $dir.
ClusterName=jpt
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups in containers: plain process tracking.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=jpt Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF

munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
       --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" \
       --seed-file="$dir/munge/munge.seed" --force
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N "$node"
# Up when the node is idle and takes jobs.
for _ in $(seq 60); do
    state=$(sinfo -h -n "$node" -o %t 2>/dev/null || true)
    case $state in
    idle*|mix*|alloc*)
        echo "export SLURM_CONF=$SLURM_CONF"
        exit 0
        ;;
    esac
    sleep 0.5
done
echo "cluster: the node did not come up (state '${state:-none}'); logs in $dir/log" >&2
tail -n 5 "$dir"/log/*.log >&2 || true
stop "$dir"
exit 1
