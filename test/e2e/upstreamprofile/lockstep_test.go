package upstreamprofile

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Where the API server serves Job spec.scheduling, a Job that targets
// Lockstep is gang-scheduled by Lockstep from that field, through the
// PodGroup the in-tree Job controller creates; Lockstep creates none.
func TestLockstepSchedulesInTreeJobGang(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	for _, name := range []string{"train-a", "train-b"} {
		job := builders.IndexedJob(ns, name, 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj())
		job.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](4)},
		}}
		if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	oneWholeOtherWaiting(t, ctx, h, ns)
}

// oneWholeOtherWaiting waits until one of Jobs train-a and train-b (4 ranks
// each, in in-tree PodGroups) runs 4/4 and the other 0/4 with its PodGroup
// saying why, and checks that Lockstep made no group of its own.
func oneWholeOtherWaiting(t *testing.T, ctx context.Context, h *harness.Harness, ns string) {
	t.Helper()
	harness.Eventually(t, ctx, "one Job 4/4 and the other 0/4 with the in-tree PodGroup saying why", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound := map[string]int{}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound[p.Labels["batch.kubernetes.io/job-name"]]++
			}
		}
		pgs, err := h.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		unschedulable := 0
		for _, pg := range pgs.Items {
			if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled); c != nil && c.Reason == lockv1.PodGroupReasonUnschedulable &&
				strings.Contains(c.Message, "minCount 4 not satisfiable") {
				unschedulable++
			}
		}
		ok := (bound["train-a"] == 4 && bound["train-b"] == 0 || bound["train-a"] == 0 && bound["train-b"] == 4) && unschedulable == 1
		return ok, fmt.Sprintf("bound %v, %d in-tree PodGroups, %d Unschedulable", bound, len(pgs.Items), unschedulable), nil
	})
	list, err := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("Lockstep must not create a second group beside the in-tree one; found %d", len(list.Items))
	}
}

// A workload controller that creates the API server's own PodGroup and
// points its pod templates at it (spec.schedulingGroup, the way JobSet, LWS
// and KubeRay are moving to) has that group scheduled by Lockstep as it
// says: two 4-rank Jobs whose templates name such groups (made here as the
// controller would) on 6 GPUs → one runs whole, the other holds nothing;
// Lockstep creates no group of its own and says so in an event.
func TestLockstepSchedulesUpstreamPodGroupNamedByTemplate(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	for _, name := range []string{"train-a", "train-b"} {
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-gang"},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}}},
		}
		if _, err := h.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		job := builders.IndexedJob(ns, name, 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj())
		job.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(pg.Name)}
		if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	oneWholeOtherWaiting(t, ctx, h, ns)
	events, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=train-a,involvedObject.kind=Job"})
	if err != nil {
		t.Fatal(err)
	}
	said := false
	for _, e := range events.Items {
		said = said || e.Reason == "PodGroupNamedByTemplate" && strings.Contains(e.Message, "names PodGroup train-a-gang") && e.Type == corev1.EventTypeNormal
	}
	if !said {
		t.Errorf("no event on Job train-a saying its pods join the PodGroup its template names; events: %+v", events.Items)
	}
}
