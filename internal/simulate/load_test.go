package simulate

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

const oneGPU = `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
`

// indexedJob is an Indexed Job of n ranks, one GPU each, with the given
// annotations and pod spec lines appended.
func indexedJob(name string, n int, annotations string, spec string) string {
	return `
apiVersion: batch/v1
kind: Job
metadata:
  name: ` + name + `
  namespace: ml
  annotations: {` + annotations + `}
spec:
  completionMode: Indexed
  parallelism: ` + itoa(n) + `
  completions: ` + itoa(n) + `
  template:
    spec:
      restartPolicy: Never
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers:
      - {name: rank, image: sim, resources: {claims: [{name: gpu}]}}
` + spec + `
---
`
}

func itoa(n int) string { return strconv.Itoa(n) }

// Every workload that cannot be simulated is refused before anything
// runs, naming the object, the field path and what to do.
func TestLoadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workload string
		want     []string
	}{
		{
			name:     "unknown kind",
			workload: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
			want:     []string{"Deployment web", `kind: Unsupported value: "apps/v1/Deployment"`, "batch/v1/Job"},
		},
		{
			name:     "a scheduling tree written by hand",
			workload: "apiVersion: scheduling.lockstep.dev/v1beta1\nkind: CompositePodGroup\nmetadata: {name: job, namespace: ml}\nspec: {schedulingPolicy: {gang: {minGroupCount: 1}}}\n",
			want:     []string{"CompositePodGroup ml/job", "a hand-written scheduling tree is not simulated: use a job whose roles make one"},
		},
		{
			name:     "unknown field",
			workload: oneGPU + strings.Replace(indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", ""), "completionMode", "completionMod", 1),
			want:     []string{"Job ml/a", `unknown field "spec.completionMod"`},
		},
		{
			name:     "malformed arrival",
			workload: oneGPU + indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h, sim.lockstep.dev/arrival: soon", ""),
			want:     []string{"Job ml/a", `metadata.annotations[sim.lockstep.dev/arrival]: Invalid value: "soon": not a Go duration`},
		},
		{
			name:     "negative runtime",
			workload: oneGPU + indexedJob("a", 2, "sim.lockstep.dev/runtime: -1h", ""),
			want:     []string{`metadata.annotations[sim.lockstep.dev/runtime]: Invalid value: "-1h": must not be negative`},
		},
		{
			name:     "missing runtime",
			workload: oneGPU + indexedJob("a", 2, "", ""),
			want:     []string{"Job ml/a", "metadata.annotations[sim.lockstep.dev/runtime]: Required value", "--default-runtime"},
		},
		{
			name:     "missing claim template",
			workload: indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", ""),
			want:     []string{"Job ml/a", `spec.template.spec.resourceClaims[0].resourceClaimTemplateName: Invalid value: "one-gpu": no ResourceClaimTemplate ml/one-gpu in the workload: add it`},
		},
		{
			name:     "unknown PriorityClass",
			workload: oneGPU + indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", "      priorityClassName: gold"),
			want:     []string{`spec.template.spec.priorityClassName: Invalid value: "gold": no PriorityClass of this name in the workload`},
		},
		{
			name:     "scheduling gates",
			workload: oneGPU + indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", "      schedulingGates: [{name: example.com/quota}]"),
			want:     []string{"spec.template.spec.schedulingGates: Forbidden: nothing removes a scheduling gate in a simulation"},
		},
		{
			name:     "inter-pod affinity",
			workload: oneGPU + indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", "      affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname}]}}"),
			want:     []string{"spec.template.spec.affinity: Forbidden: inter-pod affinity is not simulated"},
		},
		{
			name:     "suspended Job",
			workload: oneGPU + strings.Replace(indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", ""), "completionMode: Indexed", "completionMode: Indexed\n  suspend: true", 1),
			want:     []string{"spec.suspend: Forbidden: a suspended Job never runs"},
		},
		{
			name:     "duplicate job",
			workload: oneGPU + indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", "") + indexedJob("a", 2, "sim.lockstep.dev/runtime: 1h", ""),
			want:     []string{"Job ml/a", "metadata.name: Duplicate value"},
		},
		{
			name:     "pod of a missing group",
			workload: "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {scheduling.lockstep.dev/pod-group: g}, annotations: {sim.lockstep.dev/runtime: 1h}}\nspec: {containers: [{name: c, image: sim}]}\n",
			want:     []string{"Pod default/p", `metadata.labels[scheduling.lockstep.dev/pod-group]: Not found: "g"`},
		},
		{
			name: "gang larger than its pods",
			workload: "apiVersion: scheduling.lockstep.dev/v1beta1\nkind: PodGroup\nmetadata: {name: g, annotations: {sim.lockstep.dev/runtime: 1h}}\nspec: {schedulingPolicy: {gang: {minCount: 3}}}\n---\n" +
				"apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {scheduling.lockstep.dev/pod-group: g}}\nspec: {containers: [{name: c, image: sim}]}\n",
			want: []string{"PodGroup default/g", "spec.schedulingPolicy.gang.minCount: Invalid value: 3: only 1 pods name the group"},
		},
		{
			name:     "failure without a time",
			workload: "apiVersion: sim.lockstep.dev/v1alpha1\nkind: Failure\nmetadata: {name: f}\nspec: {node: gpu-0}\n",
			want:     []string{"Failure f", "spec.at: Required value"},
		},
		{
			name:     "mix with an empty runtime range",
			workload: "apiVersion: sim.lockstep.dev/v1alpha1\nkind: Mix\nmetadata: {name: m}\nspec: {jobs: 10, span: 1h, shapes: [{name: s, weight: 1, ranks: [1], runtime: {min: 2h, max: 1h}}]}\n",
			want:     []string{"Mix m", "spec.shapes[0].runtime: Invalid value", "need 0 < min ≤ max"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workload.Load([]workload.Source{{Name: "w.yaml", Data: []byte(tc.workload)}}, workload.LoadOptions{})
			if !errors.Is(err, workload.ErrInvalid) {
				t.Fatalf("Load: %v, want an ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

const threeByTwo = `
nodePools:
- name: worker
  count: 3
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
`

func cluster(t *testing.T, spec string) *Cluster {
	t.Helper()
	s, err := clusterspec.Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ClusterFromSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// What the cluster could never run is refused by Check, naming the job.
func TestCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		workload string
		want     []string
	}{
		{
			name:     "a gang larger than the cluster",
			workload: oneGPU + indexedJob("huge", 8, "sim.lockstep.dev/runtime: 1h", ""),
			want:     []string{"Job ml/huge", "spec.template: Invalid value", "no node of the cluster could ever hold it", "minCount 8 not satisfiable: at most 6 of 8 pods fit"},
		},
		{
			name:     "a pod larger than any node",
			workload: oneGPU + indexedJob("wide", 1, "sim.lockstep.dev/runtime: 1h", "      nodeSelector: {example.com/pool: none}"),
			want:     []string{"Job ml/wide", "no node of the cluster could ever hold it", "didn't match Pod's node affinity/selector"},
		},
		{
			name:     "an unknown DeviceClass",
			workload: strings.Replace(oneGPU, "gpu.example.com", "tpu.example.com", 1) + indexedJob("a", 1, "sim.lockstep.dev/runtime: 1h", ""),
			want:     []string{"ResourceClaimTemplate ml/one-gpu", `spec.spec.devices.requests[0].exactly.deviceClassName: Invalid value: "tpu.example.com": no DeviceClass of this name`},
		},
		{
			name:     "a failure of a node the cluster lacks",
			workload: "apiVersion: sim.lockstep.dev/v1alpha1\nkind: Failure\nmetadata: {name: f}\nspec: {at: 1h, node: gpu-9}\n",
			want:     []string{"Failure f", `spec.node: Invalid value: "gpu-9": no node of this name in the cluster`},
		},
		{
			name:     "a failure of a device the node lacks",
			workload: "apiVersion: sim.lockstep.dev/v1alpha1\nkind: Failure\nmetadata: {name: f}\nspec: {at: 1h, node: worker-0, device: gpu-7}\n",
			want:     []string{"Failure f", `spec.device: Invalid value: "gpu-7": node worker-0 has no device of this name`},
		},
		{
			name: "two failures of one node at once",
			workload: "apiVersion: sim.lockstep.dev/v1alpha1\nkind: Failure\nmetadata: {name: f}\nspec: {at: 1h, node: worker-0, repairAfter: 2h}\n---\n" +
				"apiVersion: sim.lockstep.dev/v1alpha1\nkind: Failure\nmetadata: {name: g}\nspec: {at: 2h, node: worker-0}\n",
			want: []string{"Failure g", "node worker-0 is already failed by Failure f then"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl, err := workload.Load([]workload.Source{{Name: "w.yaml", Data: []byte(tc.workload)}}, workload.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = Check(context.Background(), cluster(t, threeByTwo), wl)
			if !errors.Is(err, workload.ErrInvalid) {
				t.Fatalf("Check: %v, want an ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// What must not happen when nothing is wrong: a workload that fits is not
// refused, and defaults fill what the API server would.
func TestLoadAccepts(t *testing.T) {
	wl, err := workload.Load([]workload.Source{{Name: "w.yaml", Data: []byte(oneGPU + indexedJob("a", 4, "sim.lockstep.dev/arrival: 90s", "") +
		"apiVersion: v1\nkind: Pod\nmetadata: {name: lone}\nspec: {containers: [{name: c, image: sim, resources: {limits: {cpu: '2'}}}]}\n")}},
		workload.LoadOptions{DefaultRuntime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), cluster(t, threeByTwo), wl); err != nil {
		t.Fatal(err)
	}
	type got struct {
		Ref              string
		Arrival, Runtime time.Duration
		Need, Pods       int
		Groups           int
		CPU              string
	}
	var gots []got
	for _, j := range wl.Jobs {
		cpu := j.Pods[0].Spec.Containers[0].Resources.Requests.Cpu().String()
		gots = append(gots, got{j.Ref(), j.Arrival, j.Runtime, j.Need, len(j.Pods), len(j.Gangs), cpu})
	}
	want := []got{
		{"Pod default/lone", 0, time.Hour, 0, 1, 0, "2"},
		{"Job ml/a", 90 * time.Second, time.Hour, 4, 4, 1, "0"},
	}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	// The API server's defaults: one device, counted exactly.
	req := wl.ClaimTemplates[types.NamespacedName{Namespace: "ml", Name: "one-gpu"}].Spec.Spec.Devices.Requests[0].Exactly
	if req.AllocationMode != resourcev1.DeviceAllocationModeExactCount || req.Count != 1 {
		t.Errorf("claim template request not defaulted: %+v", req)
	}
}
