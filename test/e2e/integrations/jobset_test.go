package integrations

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var jobsets = jobsetv1.GroupVersion.WithResource("jobsets")

func gpuPod() *corev1.Pod {
	return builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
}

// trainer is a JobSet of a driver (1 pod) and workers (2 Jobs × 2 pods):
// 5 GPUs, one per pod.
func trainer(ns, name string) *jobsetv1.JobSet {
	return builders.JobSet(ns, name,
		builders.ReplicatedJob("driver", 1, 1, gpuPod()),
		builders.ReplicatedJob("workers", 2, 2, gpuPod()))
}

func createJobSet(t *testing.T, ctx context.Context, h *harness.Harness, js *jobsetv1.JobSet) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dynamic.Resource(jobsets).Namespace(js.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jobSetPods counts a JobSet's pods (by the JobSet controller's label),
// those bound, and whether every one is in group (by replicated job when
// groups has one entry per replicated job).
func jobSetPods(ctx context.Context, h *harness.Harness, ns, name string, groupOf func(rjob string) string) (total, bound int, grouped bool, err error) {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobsetv1.JobSetNameKey + "=" + name})
	if err != nil {
		return 0, 0, false, err
	}
	grouped = len(pods.Items) > 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
		if p.Labels[lockv1.PodGroupLabel] != groupOf(p.Labels[jobsetv1.ReplicatedJobNameKey]) {
			grouped = false
		}
	}
	return len(pods.Items), bound, grouped, nil
}

// Two JobSets that together need more GPUs than exist (5 + 5 of 8), with
// nothing Lockstep-specific but schedulerName: one runs whole, the other
// holds nothing and explains why; deleting the first lets the second run.
func TestJobSetsAreGangs(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	for _, name := range []string{"train-a", "train-b"} {
		createJobSet(t, ctx, h, trainer(ns, name))
	}
	oneWholeThenOther(t, ctx, h, ns, jobsets, "jobset", [2]string{"train-a", "train-b"}, 5, func(winner string) {
		// The JobSet's Jobs are part of its gang, not gangs of their own.
		for _, job := range []string{winner + "-driver-0", winner + "-workers-0", winner + "-workers-1"} {
			if _, err := h.PodGroup(ctx, ns, job); !apierrors.IsNotFound(err) {
				t.Errorf("child Job %s has a PodGroup of its own (err %v)", job, err)
			}
		}
	})
}

// oneWholeThenOther checks two jobs (names, of resource res, each run as a
// JobSet of its name) that together need more GPUs than exist, size pods of
// one GPU each: one runs whole, every pod in its JobSet's group; the other
// holds nothing, its condition and `explain <alias>` saying why; the
// winner's PodGroup is its JobSet's, one gang of size. Then check(winner)
// runs, the winner is deleted and the other runs whole, never restarted.
func oneWholeThenOther(t *testing.T, ctx context.Context, h *harness.Harness, ns string, res schema.GroupVersionResource, alias string, names [2]string, size int, check func(winner string)) {
	t.Helper()
	self := func(name string) func(string) string { return func(string) string { return name } }
	a, b := names[0], names[1]
	var winner, loser string
	harness.Eventually(t, ctx, fmt.Sprintf("one %s %d/%d bound, every pod in its JobSet's group", alias, size, size), func(ctx context.Context) (bool, string, error) {
		_, ba, ga, err := jobSetPods(ctx, h, ns, a, self(a))
		if err != nil {
			return false, "", err
		}
		_, bb, gb, err := jobSetPods(ctx, h, ns, b, self(b))
		if err != nil {
			return false, "", err
		}
		switch {
		case ba == size:
			winner, loser = a, b
		case bb == size:
			winner, loser = b, a
		}
		return winner != "" && ga && gb, fmt.Sprintf("%s %d bound (grouped %v), %s %d (grouped %v)", a, ba, ga, b, bb, gb), nil
	})
	harness.Eventually(t, ctx, loser+" waiting whole with a condition saying why", func(ctx context.Context) (bool, string, error) {
		total, bound, _, err := jobSetPods(ctx, h, ns, loser, self(loser))
		if err != nil {
			return false, "", err
		}
		c, err := h.ScheduledCondition(ctx, ns, loser)
		if err != nil || c == nil {
			return false, "no condition", err
		}
		return total == size && bound == 0 && c.Reason == lockv1.PodGroupReasonUnschedulable && strings.Contains(c.Message, "no free device of class gpu.example.com"),
			fmt.Sprintf("%d pods, %d bound; %s: %s", total, bound, c.Reason, c.Message), nil
	})
	pg, err := h.PodGroup(ctx, ns, winner)
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].Kind != "JobSet" || pg.OwnerReferences[0].Name != winner {
		t.Errorf("PodGroup owner: want JobSet %s, got %+v", winner, pg.OwnerReferences)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != int32(size) {
		t.Errorf("PodGroup spec: want one gang of minCount %d over every replicated job, got %+v", size, pg.Spec)
	}
	if check != nil {
		check(winner)
	}
	r := h.Explain(t, ns, alias, loser)
	if r.Unit != "PodGroup "+ns+"/"+loser || !r.Gang || r.MinCount != size || r.Bound != 0 || !strings.Contains(r.Answer, "no free device of class gpu.example.com") {
		t.Errorf("explain %s %s: unit %q gang %v minCount %d bound %d answer %q", alias, loser, r.Unit, r.Gang, r.MinCount, r.Bound, r.Answer)
	}
	if err := h.Dynamic.Resource(res).Namespace(ns).Delete(ctx, winner, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, fmt.Sprintf("%s gets all %d GPUs once %s is gone", loser, size, winner), func(ctx context.Context) (bool, string, error) {
		_, bound, _, err := jobSetPods(ctx, h, ns, loser, self(loser))
		return bound == size, fmt.Sprintf("%d bound", bound), err
	})
	h.NoLifecycleRestart(t, ctx, ns, loser)
}

// A JobSet whose workers start only once its driver is ready (dependsOn,
// as Trainer v2's TrainJob runtimes start their initializers first) could
// never be one gang: each replicated job is a gang of its own, and the
// workers are placed whole after the driver runs.
func TestJobSetWithDependenciesIsAGangPerReplicatedJob(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	js := trainer(ns, "ordered")
	js.Spec.ReplicatedJobs[1].DependsOn = []jobsetv1.DependsOn{{Name: "driver", Status: jobsetv1.DependencyReady}}
	createJobSet(t, ctx, h, js)
	groupOf := func(rjob string) string { return "ordered-" + rjob }
	harness.Eventually(t, ctx, "driver and then all 4 workers bound, each in its replicated job's group", func(ctx context.Context) (bool, string, error) {
		total, bound, grouped, err := jobSetPods(ctx, h, ns, "ordered", groupOf)
		return total == 5 && bound == 5 && grouped, fmt.Sprintf("%d pods, %d bound, grouped %v", total, bound, grouped), err
	})
	for rjob, minCount := range map[string]int32{"driver": 1, "workers": 4} {
		pg, err := h.PodGroup(ctx, ns, groupOf(rjob))
		if err != nil {
			t.Fatal(err)
		}
		if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != minCount || pg.Spec.WorkloadRef == nil || pg.Spec.WorkloadRef.TemplateName != rjob {
			t.Errorf("PodGroup %s: want gang minCount %d from template %s, got %+v", pg.Name, minCount, rjob, pg.Spec)
		}
	}
	// The gang scope is fixed with the groups.
	u, err := h.Dynamic.Resource(jobsets).Namespace(ns).Get(ctx, "ordered", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeJob})
	_, err = h.Dynamic.Resource(jobsets).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{})
	if err == nil || !strings.Contains(err.Error(), "gang scope is fixed") {
		t.Errorf("changing the gang scope of a live JobSet: want a refusal naming it, got %v", err)
	}
}

// When a rank fails, JobSet's failurePolicy recreates every child Job (a
// new restart attempt): the new attempt's pods join the same gang and are
// placed whole again as its next incarnation; with maxRestarts used up the
// JobSet fails and its gang holds nothing.
func TestJobSetRestartIsPlacedWholeAgain(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	js := trainer(ns, "flaky")
	js.Spec.FailurePolicy = &jobsetv1.FailurePolicy{MaxRestarts: 1}
	// Worker rank 1 of every worker Job fails 10 s after it starts, in every
	// attempt (the simulator reads this annotation).
	js.Spec.ReplicatedJobs[1].Template.Spec.Template.Annotations = map[string]string{"sim.lockstep.dev/fail-after-by-index": "1h,10s"}
	createJobSet(t, ctx, h, js)
	attemptBound := func(ctx context.Context, attempt string) (int, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobsetv1.JobSetNameKey + "=flaky,jobset.sigs.k8s.io/restart-attempt=" + attempt})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Labels[lockv1.PodGroupLabel] == "flaky" {
				n++
			}
		}
		return n, nil
	}
	for _, attempt := range []string{"0", "1"} {
		harness.Eventually(t, ctx, "restart attempt "+attempt+" bound whole (5/5) in the JobSet's gang", func(ctx context.Context) (bool, string, error) {
			n, err := attemptBound(ctx, attempt)
			return n == 5, fmt.Sprintf("%d of attempt %s bound", n, attempt), err
		})
	}
	harness.Eventually(t, ctx, "the JobSet failed after its one restart, its gang holding nothing", func(ctx context.Context) (bool, string, error) {
		u, err := h.Dynamic.Resource(jobsets).Namespace(ns).Get(ctx, "flaky", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		obj := &jobsetv1.JobSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return false, "", err
		}
		failed := false
		for _, c := range obj.Status.Conditions {
			failed = failed || c.Type == string(jobsetv1.JobSetFailed) && c.Status == metav1.ConditionTrue
		}
		running, err := h.RunningPods(ctx, ns, "flaky")
		if err != nil {
			return false, "", err
		}
		return failed && obj.Status.Restarts == 1 && len(running) == 0, fmt.Sprintf("failed %v, restarts %d, %d running", failed, obj.Status.Restarts, len(running)), nil
	})
	st, err := h.State(ctx, ns, "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if st.Incarnation == nil || st.Incarnation.Number != 2 {
		t.Errorf("want the gang's second incarnation to be the last (one per JobSet attempt), got %s", st)
	}
}

// getJobSet reads a JobSet through the dynamic client.
func getJobSet(ctx context.Context, h *harness.Harness, ns, name string) (*jobsetv1.JobSet, error) {
	u, err := h.Dynamic.Resource(jobsets).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	obj := &jobsetv1.JobSet{}
	return obj, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// A gang restart costs a JobSet nothing (issue 38): its replicated jobs
// restart Never with backoffLimit 0 and no failurePolicy — one counted
// failure would fail the JobSet. Its child Jobs are given, at their
// creation, the rule that ignores disruptions; one pod's GPU reported
// Unhealthy restarts the gang whole, the child Jobs recreate their pods
// (no JobSet restart: restart-attempt stays 0, status.restarts 0, no child
// Job counts a failure) and the gang runs again whole as its second
// incarnation. (A rank that fails on its own still restarts the JobSet:
// TestJobSetRestartIsPlacedWholeAgain.)
func TestJobSetGangRestartCostsNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	createJobSet(t, ctx, h, trainer(ns, "steady"))
	h.WaitRunning(t, ctx, ns, "steady", 5)
	jobs, err := h.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: jobsetv1.JobSetNameKey + "=steady"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 3 {
		t.Fatalf("want 3 child Jobs, got %d", len(jobs.Items))
	}
	for _, j := range jobs.Items {
		if p := j.Spec.PodFailurePolicy; p == nil || len(p.Rules) != 1 || p.Rules[0].Action != batchv1.PodFailurePolicyActionIgnore {
			t.Errorf("child Job %s: want the rule that ignores disruptions, got %+v", j.Name, p)
		}
	}
	t.Logf("the JobSet ran again whole %s after the restart", h.RestartOnUnhealthyDevice(t, ctx, ns, "steady", 5).Round(100*time.Millisecond))
	js, err := getJobSet(ctx, h, ns, "steady")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range js.Status.Conditions {
		if c.Type == string(jobsetv1.JobSetFailed) && c.Status == metav1.ConditionTrue {
			t.Errorf("the gang restart failed the JobSet: %s", c.Message)
		}
	}
	if js.Status.Restarts != 0 {
		t.Errorf("the gang restart cost the JobSet %d restarts", js.Status.Restarts)
	}
	jobs, err = h.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: jobsetv1.JobSetNameKey + "=steady"})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Status.Failed != 0 {
			t.Errorf("child Job %s counted %d failures", j.Name, j.Status.Failed)
		}
	}
}
