#!/usr/bin/env bash
# make demo: seed 004 under kube-scheduler v1.37 pod by pod, kube-scheduler
# v1.37 with the in-tree gang (upstream profile), and Lockstep, on fresh local
# control planes, then one comparison table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/bin/lockstep" demo --state-dir "$root/.lockstep/demo" "$@"
