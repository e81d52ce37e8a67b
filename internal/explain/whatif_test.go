package explain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// whatIfCluster is 2 racks of 2 nodes of 4 CPUs; n0 runs busy-0, a lone
// pod of priority 0 taking 3 CPUs.
func whatIfCluster() (*kubefake.Clientset, *dynamicfake.FakeDynamicClient) {
	var kube []runtime.Object
	for i := range 4 {
		kube = append(kube, builders.MakeNode().Name(fmt.Sprintf("n%d", i)).Capacity(corev1.ResourceCPU, "4").Capacity(corev1.ResourceMemory, "16Gi").
			Label(rack, fmt.Sprintf("r%d", i/2)).Obj())
	}
	busy := builders.MakePod().Namespace("other").Name("busy-0").Node("n0").Req(corev1.ResourceCPU, "3").Obj()
	busy.Spec.Priority = ptr.To(int32(0))
	busy.Status.Phase = corev1.PodRunning
	kube = append(kube, busy)
	return kubefake.NewClientset(kube...), dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		podgroup.Resource: "PodGroupList", podgroup.UpstreamResource: "PodGroupList",
		podgroup.CompositeResource: "CompositePodGroupList", podgroup.UpstreamCompositeResource: "CompositePodGroupList"})
}

// whatIfJob is an Indexed Job of n ranks of 3 CPUs each.
func whatIfJob(name string, n int, annotations, spec string) string {
	return `
apiVersion: batch/v1
kind: Job
metadata:
  name: ` + name + `
  annotations: {` + annotations + `}
spec:
  completionMode: Indexed
  parallelism: ` + fmt.Sprint(n) + `
  completions: ` + fmt.Sprint(n) + `
  template:
    spec:
      restartPolicy: Never
      schedulerName: lockstep
` + spec + `
      containers:
      - {name: rank, image: train, resources: {requests: {cpu: "3"}}}
---
`
}

// treeManifest is a tree written by hand: job (both groups, in one rack)
// → head (1 pod of 1 CPU) and workers (workers pods of 3 CPUs).
func treeManifest(workers int) string {
	out := `
apiVersion: scheduling.lockstep.dev/v1beta1
kind: CompositePodGroup
metadata: {name: job}
spec:
  schedulingPolicy: {gang: {minGroupCount: 2}}
  schedulingConstraints: {topology: [{key: example.com/rack}]}
---
apiVersion: scheduling.lockstep.dev/v1beta1
kind: PodGroup
metadata: {name: head}
spec: {parentCompositePodGroupName: job, schedulingPolicy: {gang: {minCount: 1}}}
---
apiVersion: scheduling.lockstep.dev/v1beta1
kind: PodGroup
metadata: {name: workers}
spec: {parentCompositePodGroupName: job, schedulingPolicy: {gang: {minCount: ` + fmt.Sprint(workers) + `}}}
---
`
	pod := func(name, group, cpu string) string {
		return `
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, labels: {scheduling.lockstep.dev/pod-group: ` + group + `}}
spec:
  containers: [{name: c, image: train, resources: {requests: {cpu: "` + cpu + `"}}}]
---
`
	}
	out += pod("head-0", "head", "1")
	for i := range workers {
		out += pod(fmt.Sprintf("worker-%d", i), "workers", "3")
	}
	return out
}

const highPriority = `
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
`

// TestWhatIf: `explain -f` answers for a job not yet created with the
// scheduler's decision — fits and where, fits after a preemption and of
// what, does not fit and why, waits and why — and writes nothing.
func TestWhatIf(t *testing.T) {
	rackRequired := `scheduling.lockstep.dev/required-topology: ` + rack
	for _, tc := range []struct {
		name        string
		manifest    string
		wantVerdict string
		wantAnswer  []string
		wantUnits   []WhatIfUnit
		wantPreempt string
		wantNotes   []string
	}{
		{name: "a gang that fits in the one rack with room", manifest: whatIfJob("train", 2, rackRequired, ""),
			wantVerdict: Fits, wantAnswer: []string{"Job ml/train would fit now if created: all 2 pods placeable in example.com/rack=r1"},
			wantUnits: []WhatIfUnit{{Name: "PodGroup ml/train", Pods: 2, MinCount: 2, Placeable: 2, Where: []string{"example.com/rack=r1"}, NodeCount: 2}}},
		{name: "a gang larger than any rack: preemption cannot help an equal priority", manifest: whatIfJob("train", 3, rackRequired, ""),
			wantVerdict: DoesNotFit, wantAnswer: []string{"Job ml/train would not fit now if created: ", "minCount 3 not satisfiable"},
			wantUnits: []WhatIfUnit{{Name: "PodGroup ml/train", Pods: 3, MinCount: 3}}},
		{name: "a higher-priority gang fits after preempting the busy pod", manifest: highPriority + whatIfJob("train", 4, "", "      priorityClassName: high"),
			wantVerdict: FitsAfterPreemption, wantAnswer: []string{"Job ml/train would fit if created, after the scheduler preempts: would evict", "other/busy-0", "device-hours since their last checkpoints"},
			wantUnits:   []WhatIfUnit{{Name: "PodGroup ml/train", Pods: 4, MinCount: 4, Placeable: 4, NodeCount: 4}},
			wantPreempt: "other/busy-0"},
		{name: "a gated gang waits", manifest: whatIfJob("train", 2, "", "      schedulingGates: [{name: example.com/quota}]"),
			wantVerdict: Waits, wantAnswer: []string{"Job ml/train would wait if created: ", "example.com/quota"}},
		{name: "a suspended job is answered as started, and says so", manifest: strings.Replace(whatIfJob("train", 2, rackRequired, ""), "  completionMode: Indexed", "  suspend: true\n  completionMode: Indexed", 1),
			wantVerdict: Fits, wantAnswer: []string{"all 2 pods placeable in example.com/rack=r1"},
			wantUnits: []WhatIfUnit{{Name: "PodGroup ml/train", Pods: 2, MinCount: 2, Placeable: 2, Where: []string{"example.com/rack=r1"}, NodeCount: 2}},
			wantNotes: []string{"Job ml/train is suspended (as Kueue creates what it queues): answered as if it started now"}},
		{name: "a tree written by hand fits whole in one rack: the busy one, where it fits tightest", manifest: treeManifest(1),
			wantVerdict: Fits, wantAnswer: []string{"CompositePodGroup ml/job would fit now if created: all 2 pods placeable in example.com/rack=r0"},
			wantUnits: []WhatIfUnit{{Name: "PodGroup ml/head", Pods: 1, MinCount: 1, Placeable: 1, Where: []string{"example.com/rack=r0"}, NodeCount: 1},
				{Name: "PodGroup ml/workers", Pods: 1, MinCount: 1, Placeable: 1, Where: []string{"example.com/rack=r0"}, NodeCount: 1}}},
		{name: "a LeaderWorkerSet: one gang per replica, decided in turn", manifest: `
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: infer}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        schedulerName: lockstep
        containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}]
`,
			wantVerdict: Fits, wantAnswer: []string{"LeaderWorkerSet ml/infer would fit now if created: all 4 pods placeable"},
			wantUnits: []WhatIfUnit{{Name: "PodGroup ml/infer-0", Pods: 2, MinCount: 2, Placeable: 2, NodeCount: 1}, {Name: "PodGroup ml/infer-1", Pods: 2, MinCount: 2, Placeable: 2, NodeCount: 1}}},
		{name: "a tree of 10 CPUs fits in no rack of 8", manifest: treeManifest(3),
			wantVerdict: DoesNotFit, wantAnswer: []string{"CompositePodGroup ml/job would not fit now if created: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, dyn := whatIfCluster()
			r, err := WhatIf(context.Background(), kube, dyn, []workload.Source{{Name: "job.yaml", Data: []byte(tc.manifest)}}, WhatIfOptions{Namespace: "ml"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("answer: %s; preemption: %s; units: %+v; notes: %q", r.Answer, r.Preemption, r.Units, r.Notes)
			if r.Verdict != tc.wantVerdict {
				t.Errorf("verdict %s, want %s (answer %q)", r.Verdict, tc.wantVerdict, r.Answer)
			}
			for _, want := range tc.wantAnswer {
				if !strings.Contains(r.Answer, want) {
					t.Errorf("answer %q lacks %q", r.Answer, want)
				}
			}
			if tc.wantUnits != nil {
				for i := range r.Units {
					r.Units[i].Blocked = "" // asserted through the answer
				}
				if diff := cmp.Diff(tc.wantUnits, r.Units); diff != "" {
					t.Errorf("units (-want,+got):\n%s", diff)
				}
			}
			if !strings.Contains(r.Preemption, tc.wantPreempt) || (tc.wantPreempt == "" && tc.wantVerdict != DoesNotFit && r.Preemption != "") {
				t.Errorf("preemption %q lacks %q", r.Preemption, tc.wantPreempt)
			}
			for _, want := range tc.wantNotes {
				if !strings.Contains(strings.Join(r.Notes, "\n"), want) {
					t.Errorf("notes %q lack %q", r.Notes, want)
				}
			}
			for _, a := range append(kube.Actions(), dyn.Actions()...) {
				if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
					t.Errorf("explain -f wrote to the cluster: %s %s", v, a.GetResource())
				}
			}
		})
	}
}

// What explain -f cannot answer for is refused with what to do.
func TestWhatIfRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{name: "two jobs", manifest: whatIfJob("a", 1, "", "") + whatIfJob("b", 1, "", ""),
			want: "explain -f answers for one job at a time; the manifest creates 2: Job ml/a, Job ml/b"},
		{name: "a claim template neither the manifest nor the cluster has", manifest: whatIfJob("a", 1, "", "      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]"),
			want: "no ResourceClaimTemplate ml/one-gpu in the manifest or the cluster: add it"},
		{name: "a PriorityClass neither has", manifest: whatIfJob("a", 1, "", "      priorityClassName: urgent"),
			want: "no PriorityClass of this name in the manifest or the cluster"},
		{name: "a Job of the default scheduler", manifest: strings.Replace(whatIfJob("a", 2, "", ""), "      schedulerName: lockstep\n", "", 1),
			want: "the pods of Job ml/a are scheduled by default-scheduler (schedulerName), not Lockstep: set schedulerName: lockstep on its pod template"},
		{name: "a group of a tree without its parent", manifest: strings.Replace(treeManifest(1), "kind: CompositePodGroup\nmetadata: {name: job}", "kind: CompositePodGroup\nmetadata: {name: other}", 1),
			want: "waiting for CompositePodGroup job, its parent, which does not exist: a group of a tree is never scheduled on its own in the manifest or the cluster: give the whole tree"},
		{name: "nothing to schedule", manifest: highPriority,
			want: "the manifest creates nothing to schedule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, dyn := whatIfCluster()
			_, err := WhatIf(context.Background(), kube, dyn, []workload.Source{{Name: "job.yaml", Data: []byte(tc.manifest)}}, WhatIfOptions{Namespace: "ml"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
