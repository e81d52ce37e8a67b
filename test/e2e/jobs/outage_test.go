package jobs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestWebhookOutageBlocksOnlyWhatItJudges: with the webhook process
// stopped (SIGSTOP: the API server's calls time out, as with a hung or
// unreachable webhook), a gang Job whose ranks finish completes — the Job
// controller removes its tracking finalizer from every pod — and a
// suspended gang Job resumed the way Kueue resumes it (suspend, a template
// label, annotation and toleration) runs whole; meanwhile a pod moved to
// another group, a pod joining a Job's gang or a group of lower-priority
// members, and a suspended Job's template pointed at another Job's gang
// are refused (fail closed). With the webhook back, the same are refused
// with their reasons.
func TestWebhookOutageBlocksOnlyWhatItJudges(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	high := "high-" + ns
	if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: high}, Value: 100000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), high, metav1.DeleteOptions{})
	})
	jobs := h.Client.BatchV1().Jobs(ns)
	held, other := gpuJob(ns, "held", 2), gpuJob(ns, "other", 2)
	held.Spec.Suspend, other.Spec.Suspend = ptr.To(true), ptr.To(true)
	for _, j := range []*batchv1.Job{gpuJob(ns, "done", 2), held, other} {
		if _, err := jobs.Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = jobs.Delete(context.Background(), j.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		})
	}
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "team", 2))
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, builders.MakePod().Namespace(ns).Name("team-0").Member("team").Obj(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "Job done bound whole, Job held's PodGroup created", func(ctx context.Context) (bool, string, error) {
		_, bound, _, err := jobPods(ctx, h, ns, "done")
		_, pgErr := h.PodGroup(ctx, ns, "held")
		return bound == 2 && pgErr == nil, fmt.Sprintf("done: %d bound; held's PodGroup: %v", bound, pgErr), err
	})

	resume := h.PauseComponent(t, "lockstep-webhook")

	// The ranks of done finish (an annotation the node simulator acts on):
	// the Job controller must remove its finalizer from each to complete.
	pods, _ := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=done"})
	for _, p := range pods.Items {
		patch := `{"metadata":{"annotations":{"sim.lockstep.dev/succeed-after":"1s"}}}`
		if _, err := h.Client.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("annotating rank %s while the webhook is down: %v", p.Name, err)
		}
	}
	// Kueue's resume: suspend false and the scheduling directives of the
	// flavor it admitted the Job to.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j, err := jobs.Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			return err
		}
		j.Spec.Suspend = ptr.To(false)
		j.Spec.Template.Labels["kueue.x-k8s.io/podset"] = "main"
		j.Spec.Template.Annotations = map[string]string{"kueue.x-k8s.io/workload": "job-held"}
		j.Spec.Template.Spec.Tolerations = append(j.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: "example.com/gpu", Operator: corev1.TolerationOpExists})
		_, err = jobs.Update(ctx, j, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("resuming Job held while the webhook is down: %v", err)
	}
	harness.Eventually(t, ctx, "with the webhook down, done completes (finalizers removed) and held runs whole", func(ctx context.Context) (bool, string, error) {
		j, err := jobs.Get(ctx, "done", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=done"})
		if err != nil {
			return false, "", err
		}
		tracked := 0
		for _, p := range pods.Items {
			for _, f := range p.Finalizers {
				if f == batchv1.JobTrackingFinalizer {
					tracked++
				}
			}
		}
		_, bound, labelled, err := jobPods(ctx, h, ns, "held")
		complete := jobCondition(j, batchv1.JobComplete)
		return complete && tracked == 0 && bound == 2 && labelled, fmt.Sprintf("done complete %v, %d pods with the tracking finalizer; held: %d bound, labelled %v", complete, tracked, bound, labelled), err
	})

	// What the webhook judges fails closed while it is down.
	attempts := membershipAttempts(t, ctx, h, ns, high)
	for name, attempt := range attempts {
		if err := attempt(); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("%s with the webhook down: want it refused for want of the webhook, got %v", name, err)
		}
	}
	resume()
	harness.Eventually(t, ctx, "the webhook answering again", func(ctx context.Context) (bool, string, error) {
		err := h.Cluster.Ready(ctx, "lockstep-webhook")
		return err == nil, fmt.Sprint(err), nil
	})
	reasons := map[string]string{
		"a rank moved to another group":                     "a pod's PodGroup is fixed when it is created",
		"a bare pod joining Job held's gang":                "PodGroup held is the gang of Job held",
		"a higher-priority pod joining group team":          "differs from the priority 0 of PodGroup team's other members",
		"suspended Job other's template naming held's gang": "PodGroup held is the gang of Job held",
	}
	for name, attempt := range attempts {
		if err := attempt(); err == nil || !strings.Contains(err.Error(), reasons[name]) {
			t.Errorf("%s with the webhook up: want a refusal saying %q, got %v", name, reasons[name], err)
		}
	}
}

// membershipAttempts are changes the webhook must judge: each joins a pod
// to a gang it may not join, or gives a gang a member of a priority its
// own members do not have.
func membershipAttempts(t *testing.T, ctx context.Context, h *harness.Harness, ns, highClass string) map[string]func() error {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=held"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod of Job held: %v", err)
	}
	rank := pods.Items[0].Name
	n := 0
	pod := func(group, class string) *corev1.Pod {
		n++
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("joiner-%d", n)).Member(group).Obj()
		p.Spec.PriorityClassName = class
		return p
	}
	return map[string]func() error{
		"a rank moved to another group": func() error {
			_, err := h.Client.CoreV1().Pods(ns).Patch(ctx, rank, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+lockv1.PodGroupLabel+`":"team"}}}`), metav1.PatchOptions{})
			return err
		},
		"a bare pod joining Job held's gang": func() error {
			_, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod("held", ""), metav1.CreateOptions{})
			return err
		},
		"a higher-priority pod joining group team": func() error {
			_, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod("team", highClass), metav1.CreateOptions{})
			return err
		},
		"suspended Job other's template naming held's gang": func() error {
			patch := `{"spec":{"template":{"metadata":{"labels":{"` + lockv1.PodGroupLabel + `":"held"}}}}}`
			_, err := h.Client.BatchV1().Jobs(ns).Patch(ctx, "other", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		},
	}
}

func jobCondition(j *batchv1.Job, c batchv1.JobConditionType) bool {
	for _, cond := range j.Status.Conditions {
		if cond.Type == c && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
