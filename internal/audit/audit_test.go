package audit

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
)

// row is what a test checks of a reported workload.
type row struct {
	ID               string
	Required         int
	Running, Pending int
	PartialNow       bool
	Deadlocked       bool
	Hours            map[string]float64
	Gang             bool
	Preemptions      []string
}

func rows(r *Report) []row {
	var out []row
	for _, w := range r.Workloads {
		id := w.Namespace + "/" + strings.ToLower(w.Kind) + "/" + w.Name
		if w.Gang != "" {
			id += "/" + w.Gang
		}
		rw := row{ID: id, Required: w.Required, Running: w.Now.Running, Pending: w.Now.Pending, PartialNow: w.PartialNow,
			Deadlocked: w.Deadlocked, Hours: w.DeviceHoursHeldByResource, Gang: w.Lockstep.Gang}
		for _, p := range w.Preemptions {
			rw.Preemptions = append(rw.Preemptions, fmt.Sprintf("%s %s survivors=%d after=%g %s/%s", p.Pod, p.Reason, p.Survivors, p.DeviceHoursHeldAfter, p.Source, p.AttributedBy))
		}
		out = append(out, rw)
	}
	return out
}

func gpuHours(h float64) map[string]float64 { return map[string]float64{"nvidia.com/gpu": h} }

// in is an Input at now (seconds after t0).
func in(now int, jobs []client.Object, pods ...[]*corev1.Pod) Input {
	i := Input{Now: at(now), Jobs: jobs}
	for _, ps := range pods {
		i.Pods = append(i.Pods, ps...)
	}
	return i
}

func objs(o ...client.Object) []client.Object { return o }

func TestAnalyze(t *testing.T) {
	for _, tc := range []struct {
		name          string
		input         func() Input
		want          []row
		wantDeadlocks []Deadlock
		// wantNotes, when set, are the report's notes.
		wantNotes []string
	}{
		{
			name: "partial start: 3 of 4 ranks run, the 4th unschedulable, for 30 minutes",
			input: func() Input {
				return in(1802, objs(indexedJob("train", 4, corev1.DefaultSchedulerName)), partialRanks("train", 4, 3, "nvidia.com/gpu"))
			},
			want: []row{{ID: "ml/job/train", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true}},
		},
		{
			name: "whole start: four ranks bound one by one within seconds is not reported",
			input: func() Input {
				return in(1802, objs(indexedJob("train", 4, corev1.DefaultSchedulerName)), ranks("train", 4, func(i int, w podW) podW {
					return w.req("nvidia.com/gpu", "1").bound(1 + i)
				}))
			},
		},
		{
			name: "just starting: the last rank not tried yet 5 s after the others bound is not reported",
			input: func() Input {
				return in(7, objs(indexedJob("train", 4, corev1.DefaultSchedulerName)), ranks("train", 4, func(i int, w podW) podW {
					if w = w.req("nvidia.com/gpu", "1"); i < 3 {
						return w.bound(2)
					}
					return w
				}))
			},
		},
		{
			name: "just started and already unschedulable: partial now",
			input: func() Input {
				return in(7, objs(indexedJob("train", 4, corev1.DefaultSchedulerName)), partialRanks("train", 4, 3, "nvidia.com/gpu"))
			},
			want: []row{{ID: "ml/job/train", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(0.0042), Gang: true}},
		},
		{
			name: "seed 004: two Jobs hold 3 GPUs each and each waits for one more (DRA): a deadlock",
			input: func() Input {
				a, ca := draRanks("train-a", 4, 3)
				b, cb := draRanks("train-b", 4, 3)
				i := in(1802, objs(indexedJob("train-a", 4, corev1.DefaultSchedulerName), indexedJob("train-b", 4, corev1.DefaultSchedulerName)), a, b)
				i.Claims, i.ClaimTemplates = append(ca, cb...), []*resourcev1.ResourceClaimTemplate{oneGPUTemplate()}
				return i
			},
			want: []row{
				{ID: "ml/job/train-a", Required: 4, Running: 3, Pending: 1, PartialNow: true, Deadlocked: true, Hours: map[string]float64{"gpu.example.com": 1.5}, Gang: true},
				{ID: "ml/job/train-b", Required: 4, Running: 3, Pending: 1, PartialNow: true, Deadlocked: true, Hours: map[string]float64{"gpu.example.com": 1.5}, Gang: true},
			},
			wantDeadlocks: []Deadlock{{Workloads: []string{"ml/job/train-a", "ml/job/train-b"}, Resources: []string{"gpu.example.com"}, Held: map[string]int64{"gpu.example.com": 6}}},
		},
		{
			name: "three workloads waiting in a ring (each needs what the next holds) are one deadlock",
			input: func() Input {
				ring := func(job, holds, needs string) []*corev1.Pod {
					return ranks(job, 2, func(i int, w podW) podW {
						if i == 0 {
							return w.req(holds, "1").bound(2)
						}
						return w.req(needs, "1").unschedulable(3)
					})
				}
				return in(1802, objs(indexedJob("a", 2, "default-scheduler"), indexedJob("b", 2, "default-scheduler"), indexedJob("c", 2, "default-scheduler")),
					ring("a", "example.com/x", "example.com/y"), ring("b", "example.com/y", "example.com/z"), ring("c", "example.com/z", "example.com/x"))
			},
			want: []row{
				{ID: "ml/job/a", Required: 2, Running: 1, Pending: 1, PartialNow: true, Deadlocked: true, Hours: map[string]float64{"example.com/x": 0.5}, Gang: true},
				{ID: "ml/job/b", Required: 2, Running: 1, Pending: 1, PartialNow: true, Deadlocked: true, Hours: map[string]float64{"example.com/y": 0.5}, Gang: true},
				{ID: "ml/job/c", Required: 2, Running: 1, Pending: 1, PartialNow: true, Deadlocked: true, Hours: map[string]float64{"example.com/z": 0.5}, Gang: true},
			},
			wantDeadlocks: []Deadlock{{Workloads: []string{"ml/job/a", "ml/job/b", "ml/job/c"}, Resources: []string{"example.com/x", "example.com/y", "example.com/z"},
				Held: map[string]int64{"example.com/x": 1, "example.com/y": 1, "example.com/z": 1}}},
		},
		{
			name: "two partial workloads that need what neither holds are no deadlock",
			input: func() Input {
				return in(1802, objs(indexedJob("a", 4, "default-scheduler"), indexedJob("b", 4, "default-scheduler")),
					partialRanks("a", 4, 3, "nvidia.com/gpu"), partialRanks("b", 4, 3, "vpc.amazonaws.com/efa"))
			},
			want: []row{
				{ID: "ml/job/a", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true},
				{ID: "ml/job/b", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: map[string]float64{"vpc.amazonaws.com/efa": 1.5}, Gang: true},
			},
		},
		{
			name: "partial for 10 minutes, then whole: counted, not partial now",
			input: func() Input {
				return in(1802, objs(indexedJob("train", 4, "default-scheduler")), ranks("train", 4, func(i int, w podW) podW {
					if w = w.req("nvidia.com/gpu", "1"); i < 3 {
						return w.bound(2)
					}
					return w.bound(602)
				}))
			},
			want: []row{{ID: "ml/job/train", Required: 4, Running: 4, Hours: gpuHours(0.5), Gang: true}},
		},
		{
			name: "a preempted rank leaves 3 running while its replacement waits (extended resource)",
			input: func() Input {
				pods := ranks("research", 4, func(i int, w podW) podW {
					if w = w.req("example.com/accel", "1").bound(2); i == 3 {
						return w.disrupted(100, "PreemptionByScheduler").finished(101, corev1.PodFailed)
					}
					return w
				})
				repl := pod("research-3-fghij").generateName("research-3-").ofJob("research").req("example.com/accel", "1").created(101).unschedulable(102).obj()
				return in(1901, objs(indexedJob("research", 4, "default-scheduler")), pods, []*corev1.Pod{repl})
			},
			want: []row{{ID: "ml/job/research", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: map[string]float64{"example.com/accel": 1.5}, Gang: true,
				Preemptions: []string{"research-3-abcde PreemptionByScheduler survivors=3 after=1.5 pod/"}}},
		},
		{
			name: "a gone pod's Preempted event is tied to its Job by the replacement's generated name",
			input: func() Input {
				pods := partialRanks("train", 3, 3, "nvidia.com/gpu")
				repl := pod("train-3-fghij").generateName("train-3-").ofJob("train").req("nvidia.com/gpu", "1").created(101).unschedulable(102).obj()
				i := in(1901, objs(indexedJob("train", 4, "default-scheduler")), pods, []*corev1.Pod{repl})
				i.Events = []*corev1.Event{preemptedEvent("train-3-zzzzz", "gone-uid", 100)}
				return i
			},
			// 3 GPUs from the preemption (100) until the audit; partial
			// from the replacement's creation (101).
			want: []row{{ID: "ml/job/train", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true,
				Preemptions: []string{"train-3-zzzzz Preempted survivors=3 after=1.5008 event/name"}}},
		},
		{
			name: "a Preempted event of a pod still there, without a DisruptionTarget condition, is tied by UID",
			input: func() Input {
				pods := ranks("train", 4, func(i int, w podW) podW {
					if w = w.req("nvidia.com/gpu", "1").bound(2); i == 3 {
						return w.finished(101, corev1.PodFailed)
					}
					return w
				})
				repl := pod("train-3-fghij").generateName("train-3-").ofJob("train").req("nvidia.com/gpu", "1").created(101).unschedulable(102).obj()
				i := in(1901, objs(indexedJob("train", 4, "default-scheduler")), pods, []*corev1.Pod{repl})
				i.Events = []*corev1.Event{preemptedEvent("train-3-abcde", uid("train-3-abcde"), 100)}
				return i
			},
			want: []row{{ID: "ml/job/train", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true,
				Preemptions: []string{"train-3-abcde Preempted survivors=3 after=1.5 event/uid"}}},
		},
		{
			name: "a gang taken down whole (Lockstep's restart) and waiting whole is not reported",
			input: func() Input {
				pods := ranks("train", 4, func(i int, w podW) podW {
					return w.req("nvidia.com/gpu", "1").bound(2).disrupted(100, "PreemptionByScheduler").finished(101, corev1.PodFailed)
				})
				var repl []*corev1.Pod
				for i := 0; i < 4; i++ {
					repl = append(repl, pod(fmt.Sprintf("train-%d-fghij", i)).ofJob("train").req("nvidia.com/gpu", "1").created(101).unschedulable(102).obj())
				}
				return in(1901, objs(indexedJob("train", 4, "default-scheduler")), pods, repl)
			},
		},
		{
			name: "a preempted rank whose siblings ended seconds later (the Job failed whole) left nothing partly alive",
			input: func() Input {
				return in(1901, objs(indexedJob("train", 4, "default-scheduler")), ranks("train", 4, func(i int, w podW) podW {
					if w = w.req("nvidia.com/gpu", "1").bound(2); i == 3 {
						return w.disrupted(100, "PreemptionByScheduler").finished(101, corev1.PodFailed)
					}
					return w.finished(103, corev1.PodFailed)
				}))
			},
		},
		{
			name: "a failed rank's replacement that waits makes the Job partial, no preemption",
			input: func() Input {
				pods := ranks("train", 4, func(i int, w podW) podW {
					if w = w.req("nvidia.com/gpu", "1").bound(2); i == 3 {
						return w.finished(100, corev1.PodFailed)
					}
					return w
				})
				repl := pod("train-3-fghij").ofJob("train").req("nvidia.com/gpu", "1").created(101).unschedulable(102).obj()
				return in(1901, objs(indexedJob("train", 4, "default-scheduler")), pods, []*corev1.Pod{repl})
			},
			want: []row{{ID: "ml/job/train", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true}},
		},
		{
			name: "a finished Job whose ranks ended at different times is not reported",
			input: func() Input {
				return in(1802, objs(indexedJob("train", 4, "default-scheduler")), ranks("train", 4, func(i int, w podW) podW {
					return w.req("nvidia.com/gpu", "1").bound(2).finished(100*(i+1), corev1.PodSucceeded)
				}))
			},
		},
		{
			name: "a Job scaled from 2 to 4 ranks after running whole for 10 minutes is not reported",
			input: func() Input {
				return in(1802, objs(indexedJob("train", 4, "default-scheduler")), ranks("train", 4, func(i int, w podW) podW {
					if w = w.req("nvidia.com/gpu", "1"); i < 2 {
						return w.bound(2)
					}
					return w.created(600).unschedulable(601)
				}))
			},
		},
		{
			name: "ranks created 8 s after the first ones bound are part of its start: partial",
			input: func() Input {
				return in(1810, objs(indexedJob("train", 4, "default-scheduler")), ranks("train", 4, func(i int, w podW) podW {
					if w = w.req("nvidia.com/gpu", "1"); i < 2 {
						return w.bound(2)
					}
					return w.created(10).unschedulable(11)
				}))
			},
			want: []row{{ID: "ml/job/train", Required: 4, Running: 2, Pending: 2, PartialNow: true, Hours: gpuHours(1.0), Gang: true}},
		},
		{
			name: "DRA and extended resources together; a claim the ranks share counts once",
			input: func() Input {
				pods := ranks("mix", 4, func(i int, w podW) podW {
					if w = w.req("vpc.amazonaws.com/efa", "1").sharedClaim("mix-gpus"); i < 3 {
						return w.bound(2)
					}
					return w.unschedulable(3)
				})
				i := in(1802, objs(indexedJob("mix", 4, "default-scheduler")), pods)
				i.Claims = []*resourcev1.ResourceClaim{gpuClaim("mix-gpus", 4, true)}
				return i
			},
			want: []row{{ID: "ml/job/mix", Required: 4, Running: 3, Pending: 1, PartialNow: true,
				Hours: map[string]float64{"vpc.amazonaws.com/efa": 1.5, "gpu.example.com": 2}, Gang: true}},
		},
		{
			name: "a claim deleted with its finished pod is counted from its template",
			input: func() Input {
				pods := ranks("train", 2, func(i int, w podW) podW {
					w = w.claim(fmt.Sprintf("train-%d-gpu", i))
					if i == 0 {
						return w.bound(2).finished(1802, corev1.PodSucceeded)
					}
					return w.bound(1802).finished(1803, corev1.PodSucceeded)
				})
				i := in(3600, objs(indexedJob("train", 2, "default-scheduler")), pods)
				i.ClaimTemplates = []*resourcev1.ResourceClaimTemplate{oneGPUTemplate()}
				return i
			},
			want: []row{{ID: "ml/job/train", Required: 2, Hours: map[string]float64{"gpu.example.com": 0.5}, Gang: true}},
		},
		{
			name: "every kind: JobSet, PyTorchJob, MPIJob, RayCluster, a LeaderWorkerSet's replica, a StatefulSet, a PodGroup",
			input: func() Input {
				// 3 of 4 pods run, the 4th waits (gated: no scheduler
				// verdict, so no deadlock among them).
				four := func(prefix string, f func(i int, w podW) podW) []*corev1.Pod {
					var out []*corev1.Pod
					for i := 0; i < 4; i++ {
						w := f(i, pod(fmt.Sprintf("%s-%d", prefix, i)).req("nvidia.com/gpu", "1"))
						if i < 3 {
							w = w.bound(2)
						}
						out = append(out, w.obj())
					}
					return out
				}
				js, jsJobs := jobSet("js")
				jsPods := four("js", func(i int, w podW) podW {
					job := "js-workers-0"
					if i == 0 {
						job = "js-driver-0"
					}
					return w.ofJob(job).label("jobset.sigs.k8s.io/jobset-name", "js")
				})
				ptPods := four("pt", func(_ int, w podW) podW { return w.of("kubeflow.org/v1", "PyTorchJob", "pt") })
				mpiPods := four("mpi", func(_ int, w podW) podW {
					return w.of("kubeflow.org/v2beta1", "MPIJob", "mpi").label("training.kubeflow.org/job-role", "worker")
				})
				rayPods := four("ray", func(i int, w podW) podW {
					w = w.of("ray.io/v1", "RayCluster", "ray").label("ray.io/cluster", "ray").label("ray.io/group", "gpu")
					if i == 0 {
						w = w.label("ray.io/node-type", "head")
					}
					return w
				})
				stsPods := four("db", func(_ int, w podW) podW { return w.of("apps/v1", "StatefulSet", "db") })
				pgPods := four("hand", func(_ int, w podW) podW { return w.label(lockv1.PodGroupLabel, "hand") })
				l, stss, lwsPods := lws("serve", 2, 2, func(g, w int, p podW) podW {
					if p = p.req("nvidia.com/gpu", "1"); g == 1 && w == 1 {
						return p
					}
					return p.bound(2)
				})
				i := in(1802, objs(js, jsJobs[0], jsJobs[1], pyTorchJob("pt", 3), mpiJob("mpi", 4), rayCluster("ray", 3), l),
					jsPods, ptPods, mpiPods, rayPods, stsPods, pgPods, lwsPods)
				for _, s := range stss {
					i.Owners = append(i.Owners, s)
				}
				i.PodGroups = []*lockv1.PodGroup{gangPodGroup("hand", 4)}
				return i
			},
			want: []row{
				{ID: "ml/jobset/js", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true},
				{ID: "ml/leaderworkerset/serve/serve-1", Required: 2, Running: 1, Pending: 1, PartialNow: true, Hours: gpuHours(0.5), Gang: true},
				{ID: "ml/mpijob/mpi", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true},
				{ID: "ml/podgroup/hand", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true},
				{ID: "ml/pytorchjob/pt", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true},
				{ID: "ml/raycluster/ray", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5), Gang: true},
				{ID: "ml/statefulset/db", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5)},
			},
		},
		{
			name: "Lockstep gangs: running whole, waiting whole holding nothing, past minCount with a member pending: none reported",
			input: func() Input {
				lockstepJob := func(name string) *batchv1.Job { return indexedJob(name, 4, lockv1.SchedulerName) }
				min3 := lockstepJob("past-min")
				min3.Annotations = map[string]string{jobintegration.MinCountAnnotation: "3"}
				member := func(job string, f func(i int, w podW) podW) []*corev1.Pod {
					return ranks(job, 4, func(i int, w podW) podW {
						return f(i, w.scheduler(lockv1.SchedulerName).label(lockv1.PodGroupLabel, job).req("nvidia.com/gpu", "1"))
					})
				}
				i := in(1802, objs(lockstepJob("whole"), lockstepJob("waiting"), min3),
					member("whole", func(_ int, w podW) podW { return w.bound(2) }),
					member("waiting", func(_ int, w podW) podW { return w.unschedulable(3) }),
					member("past-min", func(i int, w podW) podW {
						if i < 3 {
							return w.bound(2)
						}
						return w.unschedulable(3)
					}))
				i.PodGroups = []*lockv1.PodGroup{gangPodGroup("whole", 4), gangPodGroup("waiting", 4), gangPodGroup("past-min", 3)}
				return i
			},
		},
		{
			name: "a work-queue Job's pods are independent: some running while one waits is not reported",
			input: func() Input {
				j := indexedJob("queue", 4, "default-scheduler")
				j.Spec.Completions, j.Spec.CompletionMode = nil, ptr.To(batchv1.NonIndexedCompletion)
				return in(1802, objs(j), partialRanks("queue", 4, 3, "nvidia.com/gpu"))
			},
		},
		{
			name: "a NonIndexed Job of 4 that ran 3 is reported, not a gang for Lockstep",
			input: func() Input {
				j := indexedJob("torchrun", 4, "default-scheduler")
				j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
				return in(1802, objs(j), partialRanks("torchrun", 4, 3, "nvidia.com/gpu"))
			},
			want: []row{{ID: "ml/job/torchrun", Required: 4, Running: 3, Pending: 1, PartialNow: true, Hours: gpuHours(1.5)}},
		},
		{
			name: "replicas of a ReplicaSet and a pod alone are not audited, and say so",
			input: func() Input {
				var pods []*corev1.Pod
				for i := 0; i < 4; i++ {
					w := pod(fmt.Sprintf("web-%d", i)).of("apps/v1", "ReplicaSet", "web").req("nvidia.com/gpu", "1")
					if i < 3 {
						w = w.bound(2)
					}
					pods = append(pods, w.obj())
				}
				return in(1802, nil, pods, []*corev1.Pod{pod("alone").req("nvidia.com/gpu", "1").obj()})
			},
			wantNotes: []string{
				"1 pods not audited: pods without a controller or PodGroup (a pod alone cannot start partially)",
				"4 pods not audited: replicas of a ReplicaSet (independent: some of them running is not a partial start)",
			},
		},
		{
			name: "a partial workload holding cpu only is not reported, and the notes say so",
			input: func() Input {
				return in(1802, objs(indexedJob("cpu", 4, "default-scheduler")), partialRanks("cpu", 4, 3, "cpu"))
			},
			wantNotes: []string{"1 workloads were partial holding no devices (no extended resource, no DRA claim): not reported"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Analyze(context.Background(), tc.input(), Options{})
			if diff := cmp.Diff(tc.want, rows(r)); diff != "" {
				t.Errorf("workloads (-want,+got):\n%s", diff)
			}
			want := tc.wantDeadlocks
			if want == nil {
				want = []Deadlock{}
			}
			if diff := cmp.Diff(want, r.Deadlocks); diff != "" {
				t.Errorf("deadlocks (-want,+got):\n%s", diff)
			}
			if tc.wantNotes != nil {
				if diff := cmp.Diff(tc.wantNotes, r.Notes); diff != "" {
					t.Errorf("notes (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// Whether Lockstep makes (or would make) each workload gangs, and why not,
// as the Job integration's reconciler decides it.
func TestVerdicts(t *testing.T) {
	nonIndexed := indexedJob("torchrun", 4, "default-scheduler")
	nonIndexed.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	queue := indexedJob("queue", 4, lockv1.SchedulerName)
	queue.Spec.Completions = ptr.To[int32](8)
	inTree := indexedJob("in-tree", 4, "default-scheduler")
	inTree.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{}
	inTree.Spec.Scheduling.SchedulingPolicy = &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](4)}}
	for _, tc := range []struct {
		name string
		job  client.Object
		pod  podW
		want Verdict
	}{
		{name: "an Indexed Job of kube-scheduler", job: indexedJob("train", 4, "default-scheduler"), pod: pod("train-0").ofJob("train"),
			want: Verdict{Gang: true, Reason: "would be PodGroup train (minCount 4)", Fix: "set schedulerName: lockstep on its pod templates"}},
		{name: "a Lockstep gang", job: indexedJob("train", 4, lockv1.SchedulerName), pod: pod("train-0").ofJob("train").scheduler(lockv1.SchedulerName),
			want: Verdict{Gang: true, Already: true, Reason: "scheduled by Lockstep as PodGroup train"}},
		{name: "a NonIndexed Job", job: nonIndexed, pod: pod("torchrun-0").ofJob("torchrun"),
			want: Verdict{Reason: "completionMode is not Indexed", Fix: "set spec.completionMode: Indexed so every rank has a stable index"}},
		{name: "a Job of Lockstep that is no gang", job: queue, pod: pod("queue-0").ofJob("queue").scheduler(lockv1.SchedulerName),
			want: Verdict{Reason: "Lockstep schedules its pods one by one: completions (8) differs from parallelism (4)", Fix: "set spec.completions: 4 so all ranks run at once"}},
		{name: "a Job with the in-tree gang policy", job: inTree, pod: pod("in-tree-0").ofJob("in-tree"),
			want: Verdict{Gang: true, Already: true, Reason: "its in-tree gang policy (spec.scheduling): Lockstep schedules that group as a gang"}},
		{name: "a Job that no longer exists", pod: pod("gone-0").ofJob("gone"),
			want: Verdict{Reason: "its Job could not be read (deleted, or not listable): not judged"}},
		{name: "a StatefulSet", pod: pod("db-0").of("apps/v1", "StatefulSet", "db"),
			want: Verdict{Reason: "a StatefulSet is not a kind Lockstep makes gangs of",
				Fix: "create a PodGroup (scheduling.lockstep.dev/v1beta1) with a gang policy and label the pods scheduling.lockstep.dev/pod-group: <its name>, schedulerName: lockstep"}},
		{name: "pods naming a PodGroup that does not exist", pod: pod("hand-0").label(lockv1.PodGroupLabel, "hand"),
			want: Verdict{Reason: "its pods name PodGroup hand, which does not exist", Fix: "create the PodGroup with a gang policy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := Input{Pods: []*corev1.Pod{tc.pod.obj()}}
			if tc.job != nil {
				i.Jobs = objs(tc.job)
			}
			ws, _ := group(context.Background(), i.Pods, index(&i), integrations.All(), nil)
			if len(ws) != 1 {
				t.Fatalf("%d workloads, want 1", len(ws))
			}
			ws[0].judge(integrations.All())
			if diff := cmp.Diff(tc.want, ws[0].verdict); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// The JSON of seed 004's deadlock: the field names scripts rely on.
func TestGoldenJSON(t *testing.T) {
	a, ca := draRanks("train-a", 4, 3)
	b, cb := draRanks("train-b", 4, 3)
	i := in(1802, objs(indexedJob("train-a", 4, corev1.DefaultSchedulerName), indexedJob("train-b", 4, corev1.DefaultSchedulerName)), a, b)
	i.Claims, i.ClaimTemplates = append(ca, cb...), []*resourcev1.ResourceClaimTemplate{oneGPUTemplate()}
	got, err := json.MarshalIndent(Analyze(context.Background(), i, Options{}), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "seed004.json")
	if *rewrite {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
		t.Errorf("%s (-want,+got); `go test ./internal/audit -run TestGoldenJSON -rewrite` rewrites it:\n%s", golden, diff)
	}
}
