package upstreamprofile

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestPodGroupV1beta1IsServed(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 30*time.Second)
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang"},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}},
		},
	}
	if _, err := h.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a scheduling.k8s.io/v1beta1 PodGroup on the upstream profile: %v", err)
	}
	got, err := h.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "gang", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.SchedulingPolicy.Gang == nil || got.Spec.SchedulingPolicy.Gang.MinCount != 4 {
		t.Errorf("PodGroup read back: want gang minCount 4, got %+v", got.Spec.SchedulingPolicy)
	}
}

// The Job field survives only with WorkloadWithJob on the API server, and the
// Job controller turns it into a PodGroup only with the gate on the
// controller-manager too: this proves both got it.
func TestJobSchedulingFieldBecomesPodGroup(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 90*time.Second)
	job := builders.IndexedJob(ns, "train", 4, builders.MakePod().Scheduler("e2e-no-scheduler").Obj())
	job.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{
		SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](4)},
		},
	}
	created, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Scheduling == nil || created.Spec.Scheduling.SchedulingPolicy == nil {
		t.Fatal("Job spec.scheduling was pruned on the upstream profile; WorkloadWithJob is not on in kube-apiserver")
	}
	harness.Eventually(t, ctx, "a gang PodGroup for the Job and pods pointing at it", func(ctx context.Context) (bool, string, error) {
		pgs, err := h.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		if len(pgs.Items) != 1 {
			return false, fmt.Sprintf("%d PodGroups", len(pgs.Items)), nil
		}
		pg := pgs.Items[0]
		if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 4 {
			return false, fmt.Sprintf("PodGroup %s policy %+v", pg.Name, pg.Spec.SchedulingPolicy), nil
		}
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		linked := 0
		for _, p := range pods.Items {
			if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName == pg.Name {
				linked++
			}
		}
		return linked == 4, fmt.Sprintf("%d of %d pods name PodGroup %s", linked, len(pods.Items), pg.Name), nil
	})
}
