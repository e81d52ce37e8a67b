#!/usr/bin/env bash
# make demo: seed 004 under kube-scheduler v1.37 pod by pod, kube-scheduler
# v1.37 with the in-tree gang (upstream profile), and Lockstep, on fresh local
# control planes, then one comparison table.
#
# hack/demo.sh TOOL…: the binaries the demo runs (the Makefile's DEMO_TOOLS)
# are built first (hack/build-tools.sh: only those missing or stale). On a
# fresh machine that is most of the wait — the Kubernetes binaries build from
# source, about 6 minutes on 2 vCPUs — so when one is missing the demo first
# shows what it will show: the same scenario replayed by `lockstep simulate`
# with the scheduler's own decision code, in virtual time, in a second.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
missing=()
for t in "$@"; do
  [[ -x "$root/bin/$t" ]] || missing+=("$t")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "The local control plane's binaries are built from source first (${missing[*]}): on a fresh"
  echo "machine about 6 minutes on 2 vCPUs. Meanwhile, what the demo will show, simulated:"
  echo "lockstep simulate --cluster examples/clusters/default.yaml -f examples/simulate/seed004.yaml"
  echo
  "$root/bin/lockstep" simulate --cluster "$root/examples/clusters/default.yaml" -f "$root/examples/simulate/seed004.yaml"
  echo
fi
"$root/hack/build-tools.sh" "$@"
exec "$root/bin/lockstep" demo --state-dir "$root/.lockstep/demo"
