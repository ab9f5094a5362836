#!/bin/bash
# Submits the job array of N shards of a trace and its merge (scale/README.md):
#   scale/submit.sh [--wait] TRACE.DIR N PARTS.DIR OUT.json [SHARD OPTIONS]
# Prints the two job ids. With --wait, returns when the merge is done, with
# its status (a failed shard cancels the merge).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
wait=()
if [ "${1:-}" = --wait ]; then
    wait=(--wait)
    shift
fi
[ $# -ge 4 ] || { echo "usage: $0 [--wait] TRACE.DIR N PARTS.DIR OUT.json [SHARD OPTIONS]" >&2; exit 2; }
trace=$(realpath -m "$1") n=$2 parts=$(realpath -m "$3") out=$(realpath -m "$4")
shift 4
mkdir -p "$parts"
array=$(sbatch --parsable --array="0-$((n - 1))" --chdir="$parts" \
        "$here/shard.sbatch" "$trace" "$n" "$parts" "$@")
array=${array%%;*}
echo "shards: job $array"
rc=0
merge=$(sbatch --parsable "${wait[@]}" --dependency="afterok:$array" --kill-on-invalid-dep=yes \
        --chdir="$parts" "$here/merge.sbatch" "$parts" "$out") || rc=$?
merge=${merge%%;*}
echo "merge: job $merge"
if [ ${#wait[@]} -gt 0 ]; then
    # sbatch --wait says 0 for a job cancelled before it ran (a shard failed)
    state=$(scontrol show job "$merge" -o 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    if [ "$rc" = 0 ] && [ "$state" != COMPLETED ]; then
        echo "merge: job $merge ended ${state:-unknown}: a shard failed (see jpt-shard-${array}_*.out in $parts)" >&2
        rc=1
    fi
fi
exit $rc
