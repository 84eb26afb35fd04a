#!/usr/bin/env bash
# Runs taskmeter on NODES nodes (a job array, one task per node), waits for it, then compares
# the nodes with each other (the first node by name is the baseline): exit status 1 when a node
# is worse beyond the noise threshold, as `taskmeter compare`.
#   TASKMETER_HISTORY=postgres://USER@HOST/DB examples/slurm/compare-nodes.sh NODES [sbatch flags...]
set -euo pipefail
nodes=${1:?usage: compare-nodes.sh NODES [sbatch flags...]}
shift
: "${TASKMETER_HISTORY:?set TASKMETER_HISTORY to the shared postgres:// history}"
here=$(cd "$(dirname "$0")" && pwd)
job=$(sbatch --parsable --wait --array="0-$((nodes - 1))" "$@" "$here/taskmeter-array.sbatch")
job=${job%%;*}
label=${TASKMETER_LABEL:-slurm-$job}
echo "job $job: runs labelled $label" >&2
"${TASKMETER:-taskmeter}" history list --label "$label"
exec "${TASKMETER:-taskmeter}" history compare --by machine --label "$label"
