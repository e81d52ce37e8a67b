package jobs

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A Job whose pod template names a hand-written PodGroup through upstream's
// spec.schedulingGroup, on an API server that does not serve it (EKS: the
// field is dropped after admission): Lockstep keeps the group the user
// named — its pods join "hand", placed as that group says — and makes no
// gang of its own for the Job.
func TestJobNamingAGroupThroughSchedulingGroup(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "hand", 2))
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("hand")}
	job := builders.IndexedJob(ns, "named", 2, pod)
	created, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Template.Spec.SchedulingGroup != nil {
		t.Logf("this API server serves spec.schedulingGroup; the label is kept beside it")
	}
	if got := created.Spec.Template.Labels[lockv1.PodGroupLabel]; got != "hand" {
		t.Fatalf("the Job's template joins PodGroup %q, want the one it named, hand", got)
	}
	h.WaitRunning(t, ctx, ns, "hand", 2)
	if _, err := h.PodGroup(ctx, ns, "named"); !apierrors.IsNotFound(err) {
		t.Errorf("Lockstep made a gang of its own for the Job (err %v)", err)
	}
	harness.Eventually(t, ctx, "the Job's pods in PodGroup hand", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=hand"})
		return err == nil && len(pods.Items) == 2, fmt.Sprintf("%d pods", len(pods.Items)), err
	})
}
