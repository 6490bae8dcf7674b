#!/usr/bin/env bash
# Submits posenc compare --full to Slurm: POSENC_SHARDS shards (16) as one job array, and the
# merge as a job that starts once every shard has succeeded. Run it in the folder the jobs are to
# start in; the other variables are compare.sbatch's (POSENC, POSENC_RUNS, POSENC_OUT,
# POSENC_ARGS, POSENC_MERGE_ARGS), and sbatch's own input variables (sbatch(1): SBATCH_ACCOUNT,
# SBATCH_PARTITION, ...) reach both jobs.
#   POSENC=$PWD/build/posenc POSENC_SHARDS=16 examples/slurm/compare.sh
# It prints the two job ids: "shards JOBID (array 0-15), merge JOBID".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
shards=${POSENC_SHARDS:-16}
case $shards in
'' | *[!0-9]* | 0*)
    echo "compare.sh: POSENC_SHARDS='$shards' is not a whole number from 1" >&2
    exit 2
    ;;
esac

# sbatch(1): --parsable prints "jobid[;cluster]"
array=$(sbatch --parsable --array="0-$((shards - 1))" "$here/compare.sbatch" shard)
array=${array%%;*}
# sbatch(1): --dependency=afterok, "after the specified jobs have successfully executed (ran to
# completion with an exit code of zero)"; the array's job id stands for all of its tasks.
# --kill-on-invalid-dep=yes: when a shard fails, the merge is cancelled rather than left pending
# (DependencyNeverSatisfied). The merge takes a node as the shards do (#SBATCH --exclusive), for
# less time, with its own log (%j: its job id).
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes --job-name=posenc-merge \
    --time=00:30:00 --output=%x-%j.out "$here/compare.sbatch" merge)
merge=${merge%%;*}
echo "shards $array (array 0-$((shards - 1))), merge $merge"
