#!/usr/bin/env bash
# make demo: until the scheduler lands, the demo starts the local control
# plane, shows what it holds (3 Ready nodes, 6 simulated GPUs in real
# resource.k8s.io/v1 ResourceSlices), and stops it again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state="$root/.lockstep/demo"
kubectl=("$root/bin/kubectl" --kubeconfig "$state/kubeconfig")
trap '"$root/bin/lockstep" dev down --state-dir "$state" >/dev/null || true' EXIT
"$root/bin/lockstep" dev up --detach --state-dir "$state" --base-port "${DEMO_BASE_PORT:-16543}"
echo
"${kubectl[@]}" version
echo
"${kubectl[@]}" get nodes -o wide
echo
"${kubectl[@]}" get resourceslices,deviceclasses
echo
"${kubectl[@]}" get resourceslices -o custom-columns='SLICE:.metadata.name,NODE:.spec.nodeName,DRIVER:.spec.driver,DEVICES:.spec.devices[*].name'
