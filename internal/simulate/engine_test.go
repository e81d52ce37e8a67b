package simulate

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/simulate/report"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

func run(t *testing.T, cl *Cluster, docs string, opts Options) *report.Report {
	t.Helper()
	wl, err := workload.Load([]workload.Source{{Name: "w.yaml", Data: []byte(docs)}}, workload.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), cl, wl); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), cl, wl, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fates are each job's start and end (hours) under each scheduler.
func fates(r *report.Report) map[string][]string {
	out := map[string][]string{}
	for _, s := range r.Schedulers {
		for _, j := range s.JobDetails {
			out[s.Name] = append(out[s.Name], fmt.Sprintf("%s %s→%s %s", j.Job, report.FormatSeconds(j.StartSeconds), report.FormatSeconds(j.EndSeconds), report.FormatNodes(j.Nodes)))
		}
	}
	return out
}

// The fast paths decide as the plain loop does: pods of a job decided as
// one basic unit land where deciding them one by one puts them, and the
// capacity check refuses only what Decide would refuse (an over-asked day
// of 400 jobs with preemption, every job's start, end and nodes equal).
func TestFastPathsDecideAsThePlainLoop(t *testing.T) {
	cl, wl := load(t, "day")
	fast, err := Run(context.Background(), cl, wl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Run(context.Background(), cl, wl, Options{noBatch: true, noCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fates(plain), fates(fast)); diff != "" {
		t.Errorf("(-plain,+fast):\n%s", diff)
	}
	for i, s := range fast.Schedulers {
		if s.Decisions >= plain.Schedulers[i].Decisions {
			t.Errorf("%s: the fast paths made %d decisions, the plain loop %d: nothing spared", s.Name, s.Decisions, plain.Schedulers[i].Decisions)
		}
	}
	if fast.Schedulers[0].Preemptions == 0 {
		t.Errorf("the day's mix preempts nothing under Lockstep: it tests less than it says")
	}
}

const gpus3x2 = `
nodePools:
- name: worker
  count: 3
  capacity: {cpu: "8", memory: 32Gi, pods: "110", example.com/accel: "2"}
  devices:
  - driver: gpu.example.com
    count: 2
`

const priorities = `
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
`

// rankJob is an Indexed Job of n ranks of priority class, each asking a
// DRA GPU or (accel) an example.com/accel.
func rankJob(name string, n int, class, annotations string, accel bool) string {
	claims := "      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n      containers:\n      - {name: rank, image: sim, resources: {claims: [{name: gpu}]}}\n"
	if accel {
		claims = "      containers:\n      - {name: rank, image: sim, resources: {limits: {example.com/accel: \"1\"}}}\n"
	}
	return fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: ml, annotations: {%s}}
spec:
  completionMode: Indexed
  parallelism: %d
  completions: %d
  template:
    spec:
      restartPolicy: Never
      priorityClassName: %s
%s---
`, name, annotations, n, n, class, claims)
}

type summary struct {
	Fates          []string
	Preemptions    int
	PreemptedPods  int
	HeldIdleHours  float64
	Restarts       int
	NeverStarted   int
	CompletedCount int
}

func summarize(r *report.Report) map[string]summary {
	out := map[string]summary{}
	f := fates(r)
	for _, s := range r.Schedulers {
		out[s.Name] = summary{Fates: f[s.Name], Preemptions: s.Preemptions, PreemptedPods: s.PreemptedPods, HeldIdleHours: s.DeviceHoursHeldIdle,
			Restarts: s.GangRestarts, NeverStarted: s.JobsNeverStarted, CompletedCount: s.JobsCompleted}
	}
	return out
}

// Research holds 4 of 6 devices for 4h; production asks for 4 at 1h.
// With DRA GPUs only Lockstep preempts (research whole, which runs again
// after production); kube-scheduler pod by pod places the 2 ranks that fit
// and holds them idle, the in-tree gang waits. With device-plugin
// accelerators all preempt, but pod by pod and the in-tree gang
// (disruptionMode single) evict only 2 ranks: research is left holding 2
// accelerators it cannot use until production is done.
func TestPreemption(t *testing.T) {
	cl := cluster(t, gpus3x2)
	for _, tc := range []struct {
		name  string
		accel bool
		want  map[string]summary
	}{
		{
			name: "DRA GPUs",
			want: map[string]summary{
				Lockstep: {Fates: []string{"Job ml/research 0s→6h0m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h0m0s→2h0m0s worker-0 ×2, worker-1 ×2"},
					Preemptions: 1, PreemptedPods: 4, CompletedCount: 2},
				PodByPod: {Fates: []string{"Job ml/research 0s→4h0m0s worker-0 ×2, worker-1 ×2", "Job ml/production 4h0m0s→5h0m0s worker-0 ×2, worker-2 ×2"},
					HeldIdleHours: 6, CompletedCount: 2},
				InTreeGang: {Fates: []string{"Job ml/research 0s→4h0m0s worker-0 ×2, worker-1 ×2", "Job ml/production 4h0m0s→5h0m0s worker-0 ×2, worker-1 ×2"},
					CompletedCount: 2},
			},
		},
		{
			name: "device-plugin accelerators", accel: true,
			want: map[string]summary{
				Lockstep: {Fates: []string{"Job ml/research 0s→6h0m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h0m0s→2h0m0s worker-0 ×2, worker-1 ×2"},
					Preemptions: 1, PreemptedPods: 4, CompletedCount: 2},
				PodByPod: {Fates: []string{"Job ml/research 0s→6h0m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h0m0s→2h0m0s worker-0 ×2, worker-2 ×2"},
					Preemptions: 2, PreemptedPods: 2, HeldIdleHours: 2, CompletedCount: 2},
				InTreeGang: {Fates: []string{"Job ml/research 0s→6h0m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h0m0s→2h0m0s worker-0 ×2, worker-2 ×2"},
					Preemptions: 1, PreemptedPods: 2, HeldIdleHours: 2, CompletedCount: 2},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := priorities + oneGPU +
				rankJob("research", 4, "research", "sim.lockstep.dev/runtime: 4h", tc.accel) +
				rankJob("production", 4, "production", "sim.lockstep.dev/arrival: 1h, sim.lockstep.dev/runtime: 1h", tc.accel)
			if diff := cmp.Diff(tc.want, summarize(run(t, cl, w, Options{}))); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// A node fails under a running gang for an hour. Lockstep's integrity
// verdict takes the gang down whole and it waits holding nothing until it
// fits again; the in-tree gang (disruptionMode single) and pod by pod keep
// the survivors holding their devices, idle, for that hour. A device
// failure does the same to the gang that holds the device.
func TestFailures(t *testing.T) {
	cl := cluster(t, gpus3x2)
	base := priorities + oneGPU +
		rankJob("train", 4, "research", "sim.lockstep.dev/runtime: 2h", false) +
		rankJob("other", 2, "research", "sim.lockstep.dev/runtime: 5h", false)
	for _, tc := range []struct {
		name    string
		failure string
		want    map[string]summary
	}{
		{
			name:    "node",
			failure: "apiVersion: sim.lockstep.dev/v1alpha1\nkind: Failure\nmetadata: {name: down}\nspec: {at: 30m, node: worker-0, repairAfter: 1h}\n",
			want: map[string]summary{
				Lockstep:   {Fates: []string{"Job ml/train 0s→3h30m0s worker-0 ×2, worker-1 ×2", "Job ml/other 0s→5h0m0s worker-2 ×2"}, Restarts: 1, CompletedCount: 2},
				PodByPod:   {Fates: []string{"Job ml/train 0s→3h30m0s worker-0 ×2, worker-1 ×2", "Job ml/other 0s→5h0m0s worker-2 ×2"}, HeldIdleHours: 2, CompletedCount: 2},
				InTreeGang: {Fates: []string{"Job ml/train 0s→3h30m0s worker-0 ×2, worker-1 ×2", "Job ml/other 0s→5h0m0s worker-2 ×2"}, HeldIdleHours: 2, CompletedCount: 2},
			},
		},
		{
			name:    "device",
			failure: "apiVersion: sim.lockstep.dev/v1alpha1\nkind: Failure\nmetadata: {name: bad}\nspec: {at: 30m, node: worker-0, device: gpu-0, repairAfter: 1h}\n",
			want: map[string]summary{
				Lockstep:   {Fates: []string{"Job ml/train 0s→3h30m0s worker-0 ×2, worker-1 ×2", "Job ml/other 0s→5h0m0s worker-2 ×2"}, Restarts: 1, CompletedCount: 2},
				PodByPod:   {Fates: []string{"Job ml/train 0s→3h30m0s worker-0 ×2, worker-1 ×2", "Job ml/other 0s→5h0m0s worker-2 ×2"}, HeldIdleHours: 3, CompletedCount: 2},
				InTreeGang: {Fates: []string{"Job ml/train 0s→3h30m0s worker-0 ×2, worker-1 ×2", "Job ml/other 0s→5h0m0s worker-2 ×2"}, HeldIdleHours: 3, CompletedCount: 2},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(run(t, cl, base+tc.failure, Options{}))); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// What must not happen when nothing is wrong: jobs that all fit at once
// start on arrival and end after their runtime under every scheduler,
// with nothing preempted, restarted or held idle.
func TestRoomyClusterIsTheSameUnderEveryScheduler(t *testing.T) {
	cl := cluster(t, gpus3x2)
	w := priorities + oneGPU +
		rankJob("a", 2, "research", "sim.lockstep.dev/runtime: 1h", false) +
		rankJob("b", 2, "production", "sim.lockstep.dev/arrival: 10m, sim.lockstep.dev/runtime: 30m", false) +
		rankJob("c", 2, "research", "sim.lockstep.dev/arrival: 20m, sim.lockstep.dev/runtime: 2h", true)
	got := summarize(run(t, cl, w, Options{}))
	want := summary{Fates: []string{"Job ml/a 0s→1h0m0s worker-0 ×2", "Job ml/b 10m0s→40m0s worker-1 ×2", "Job ml/c 20m0s→2h20m0s worker-0 ×2"}, CompletedCount: 3}
	for _, m := range ModelNames() {
		if diff := cmp.Diff(want, got[m]); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", m, diff)
		}
	}
}

// Failed nodes and devices are subtracted from the free devices once,
// however their failures and repairs overlap, and a repair gives back
// exactly what the failure took.
func TestFreeDevicesCountsAFailureOnce(t *testing.T) {
	type step struct {
		node   string
		device int  // +1 a device fails, -1 it is repaired, 0 the node
		down   bool // for the node
	}
	tests := map[string]struct {
		steps []step
		want  int
	}{
		"nothing failed":                  {want: 16},
		"a node down":                     {steps: []step{{node: "a", down: true}}, want: 8},
		"a device failed":                 {steps: []step{{node: "a", device: 1}}, want: 15},
		"a device, then its node":         {steps: []step{{node: "a", device: 1}, {node: "a", down: true}}, want: 8},
		"a node, then one of its devices": {steps: []step{{node: "a", down: true}, {node: "a", device: 1}}, want: 8},
		"device repaired while the node is down, node back": {
			steps: []step{{node: "a", device: 1}, {node: "a", down: true}, {node: "a", device: -1}, {node: "a"}}, want: 16},
		"node back, device still failed": {
			steps: []step{{node: "a", device: 1}, {node: "a", down: true}, {node: "a"}}, want: 15},
		"a node reported down twice": {steps: []step{{node: "b", down: true}, {node: "b", down: true}}, want: 8},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recorder{devices: 16, nodeDevices: map[string]int{"a": 8, "b": 8}, down: map[string]bool{}, failedDev: map[string]int{}}
			for _, s := range tc.steps {
				if s.device != 0 {
					r.deviceDown(s.node, s.device)
				} else {
					r.nodeDown(s.node, s.down)
				}
			}
			if diff := cmp.Diff(tc.want, r.freeDevices()); diff != "" {
				t.Errorf("free devices (-want,+got):\n%s", diff)
			}
		})
	}
}
