package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// hasEvent reports whether an event of reason on kind/name says every one
// of says.
func hasEvent(ctx context.Context, h *harness.Harness, ns, kind, name, reason string, says ...string) (bool, string, error) {
	evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		return false, "", err
	}
	var seen []string
	for _, e := range evs.Items {
		seen = append(seen, e.Reason+": "+e.Message)
		if e.Reason != reason {
			continue
		}
		all := true
		for _, s := range says {
			all = all && strings.Contains(e.Message, s)
		}
		if all {
			return true, "", nil
		}
	}
	return false, fmt.Sprintf("%s %s events: %q", kind, name, seen), nil
}

// Issue 28, finding 8: a PodGroup made before a Job of its name is never
// the Job's gang. At the Job's creation the webhook refuses the Job, naming
// the group and the fix.
func TestJobRefusedWhenAGroupHasItsName(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, time.Minute)
	h.CreatePodGroup(ctx, t, builders.MakePodGroup().Namespace(ns).Name("train").MinCount(2).Obj())
	_, err := h.Client.BatchV1().Jobs(ns).Create(ctx, gpuJob(ns, "train", 4), metav1.CreateOptions{})
	for _, want := range []string{"metadata.name", "PodGroup train has no controller", "Lockstep never adopts it", "delete PodGroup train"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want the Job refused with %q, got %v", want, err)
		}
	}
	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.OwnerReferences) != 0 || pg.Spec.SchedulingPolicy.Gang.MinCount != 2 {
		t.Errorf("the user's PodGroup was changed: owners %v, minCount %d", pg.OwnerReferences, pg.Spec.SchedulingPolicy.Gang.MinCount)
	}
}

// Issue 28, finding 8, where the webhook cannot refuse: a Job becomes a
// gang (it is scaled up) after a PodGroup of its name was made by hand. The
// controller does not adopt the group and says so on the Job and the group;
// the Job's ranks do not join it (none is placed in it); once the group is
// deleted the Job gets its own, controlled by it, and runs whole.
func TestJobNeverAdoptsAGroupOfItsName(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	job := gpuJob(ns, "train", 1)
	job.Spec.Suspend = ptr.To(true)
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.CreatePodGroup(ctx, t, builders.MakePodGroup().Namespace(ns).Name("train").MinCount(2).Obj())
	// Four ranks: now a gang; still suspended, so the caches see it before
	// any pod is made.
	patch := func(p string) {
		t.Helper()
		if _, err := h.Client.BatchV1().Jobs(ns).Patch(ctx, "train", types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch(`{"spec":{"parallelism":4,"completions":4}}`)
	harness.Eventually(t, ctx, "a NotControlled warning on the Job and on the group, with the fix", func(ctx context.Context) (bool, string, error) {
		onJob, why, err := hasEvent(ctx, h, ns, "Job", "train", "NotControlled", "PodGroup train is not this Job's: it has no controller", "delete PodGroup train and Lockstep creates the Job's own")
		if err != nil || !onJob {
			return false, why, err
		}
		return hasEvent(ctx, h, ns, "PodGroup", "train", "NotControlled", "Job train wants a PodGroup of this name", "delete PodGroup train")
	})
	patch(`{"spec":{"suspend":false}}`)
	harness.Eventually(t, ctx, "4 ranks, marked as the Job's gang", func(ctx context.Context) (bool, string, error) {
		pods, _, err := h.GroupPods(ctx, ns, "train")
		if err != nil {
			return false, "", err
		}
		for _, p := range pods {
			if p.Annotations[lockv1.GangOfAnnotation] != "Job.batch/train" {
				return false, "", fmt.Errorf("pod %s: annotation %s=%q, want Job.batch/train", p.Name, lockv1.GangOfAnnotation, p.Annotations[lockv1.GangOfAnnotation])
			}
		}
		return len(pods) == 4, fmt.Sprintf("%d pods", len(pods)), nil
	})
	// The user's own pods join the user's group (minCount 2) beside the
	// ranks; the scheduler places the group with those two alone.
	for _, name := range []string{"mine-0", "mine-1"} {
		p := builders.MakePod().Namespace(ns).Name(name).Member("train").Req("cpu", "100m").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "the user's group placed with its own 2 pods, none of the Job's ranks", func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, "train")
		if err != nil || c == nil {
			return false, "no condition", err
		}
		_, ranks, _, err := jobPods(ctx, h, ns, "train")
		if err != nil {
			return false, "", err
		}
		if ranks > 0 {
			return false, "", fmt.Errorf("%d ranks were placed in a group their Job does not control (%s: %s)", ranks, c.Reason, c.Message)
		}
		return c.Reason == lockv1.PodGroupReasonScheduled && strings.HasPrefix(c.Message, "2 of 2 pods placed"), c.Reason + ": " + c.Message, nil
	})
	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.OwnerReferences) != 0 || pg.Spec.SchedulingPolicy.Gang.MinCount != 2 {
		t.Errorf("the user's PodGroup was adopted or changed: owners %v, minCount %d", pg.OwnerReferences, pg.Spec.SchedulingPolicy.Gang.MinCount)
	}
	if err := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the Job's own group, controlled by it, and its 4 ranks bound whole", func(ctx context.Context) (bool, string, error) {
		pg, err := h.PodGroup(ctx, ns, "train")
		if err != nil {
			return false, "", nil
		}
		ref := metav1.GetControllerOf(pg)
		if ref == nil || ref.Kind != "Job" || ref.Name != "train" {
			return false, fmt.Sprintf("PodGroup train controlled by %v", ref), nil
		}
		_, bound, _, err := jobPods(ctx, h, ns, "train")
		c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled)
		return bound == 4 && pg.Spec.SchedulingPolicy.Gang.MinCount == 4, fmt.Sprintf("%d bound, minCount %d, condition %v", bound, pg.Spec.SchedulingPolicy.Gang.MinCount, c), err
	})
}
