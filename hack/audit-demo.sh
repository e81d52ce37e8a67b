#!/usr/bin/env bash
# The cluster docs/audit.md audits: a local control plane running
# kube-scheduler v1.37 beside Lockstep, where
#   ml-team: seed 004 pod by pod — train-a and train-b, 4 ranks of one DRA GPU
#            each, their ranks arriving interleaved → 3 + 3, both stuck —
#            beside finetune, a Lockstep gang of 2 running whole;
#   prod:    research (priority 100, 4 ranks of example.com/accel) running,
#            then production (priority 10000, 6 ranks): kube-scheduler
#            preempts 2 research ranks, research is left 2/4 holding 2.
# It waits WAIT seconds (default 180) for device-hours to add up, then runs
# `lockstep audit -A`; the cluster stays up (stop it with
#   bin/lockstep dev down --state-dir .lockstep/audit-demo).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state=$root/.lockstep/audit-demo
wait_s=${WAIT:-180}
export KUBECONFIG=$state/kubeconfig
k() { "$root/bin/kubectl" "$@"; }

mkdir -p "$(dirname "$state")"
cat >"$state.cluster.yaml" <<'EOF'
nodePools:
- name: gpu
  count: 4
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
- name: accel
  count: 2
  capacity: {cpu: "32", memory: 256Gi, pods: "110", example.com/accel: "4"}
EOF
"$root/bin/lockstep" dev up --detach --state-dir "$state" --base-port "${BASE_PORT:-24443}" \
  --schedulers kube-scheduler,lockstep --cluster "$state.cluster.yaml"

# job NAME NAMESPACE RANKS PARALLELISM SCHEDULER ACCELERATOR [PRIORITY-CLASS]
job() {
  local acc='resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]'
  local res='{claims: [{name: gpu}]}'
  if [ "$6" = accel ]; then acc='' res='{requests: {example.com/accel: "1"}, limits: {example.com/accel: "1"}}'; fi
  k apply -f - <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: $2}
spec:
  completionMode: Indexed
  completions: $3
  parallelism: $4
  backoffLimit: 4
  podFailurePolicy:
    rules:
    - action: Ignore
      onPodConditions: [{type: DisruptionTarget, status: "True"}]
  template:
    spec:
      schedulerName: $5
      priorityClassName: ${7:-""}
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      $acc
      containers:
      - name: trainer
        image: registry.example/trainer:v1
        resources: $res
EOF
}

k apply -f - <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: ml-team}
---
apiVersion: v1
kind: Namespace
metadata: {name: prod}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: research}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: production}
value: 10000
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml-team}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
EOF

job finetune ml-team 2 2 lockstep gpu
bound() { # NAMESPACE JOB: wait until the Job's pods are bound
  sleep 2
  k -n "$1" wait --for=condition=PodScheduled pod -l "batch.kubernetes.io/job-name=$2" --timeout=60s
}
bound ml-team finetune
job train-a ml-team 4 1 default-scheduler gpu
job train-b ml-team 4 1 default-scheduler gpu
for r in 2 3 4; do
  for j in train-a train-b; do
    sleep 2
    k -n ml-team patch job "$j" --type merge -p "{\"spec\":{\"parallelism\":$r}}"
  done
done

job research prod 4 4 default-scheduler accel research
bound prod research
job production prod 6 6 default-scheduler accel production

echo "waiting ${wait_s}s for device-hours to add up"
sleep "$wait_s"
"$root/bin/lockstep" audit -A
