package integrity

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// gangJob starts a 4-rank GPU Job (backoffLimit 0, no podFailurePolicy:
// Lockstep's admission gives it the rule that keeps gang restarts out of
// backoffLimit) and waits for it to run. tweaks change the Job before it is
// created.
func gangJob(t *testing.T, ctx context.Context, h *harness.Harness, ns string, tweaks ...func(*batchv1.Job)) map[types.UID]string {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := builders.IndexedJob(ns, "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj())
	for _, tweak := range tweaks {
		tweak(job)
	}
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Before the namespace goes (cleanups run last in, first out): a Job
	// with backoffLimitPerIndex keeps its failed pods' finalizers while it
	// cannot create replacements in a terminating namespace.
	t.Cleanup(func() {
		_ = h.Client.BatchV1().Jobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	var running map[types.UID]string
	harness.Eventually(t, ctx, "4 ranks running", func(ctx context.Context) (bool, string, error) {
		running = runningPods(ctx, h, ns)
		return len(running) == 4, fmt.Sprintf("%d running", len(running)), nil
	})
	return running
}

func runningPods(ctx context.Context, h *harness.Harness, ns string) map[types.UID]string {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[types.UID]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.UID] = p.Spec.NodeName
		}
	}
	return out
}

// deviceOf returns the pool/device the claim of one running pod holds.
func deviceOf(t *testing.T, ctx context.Context, h *harness.Harness, ns string) (pool, device string) {
	t.Helper()
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if a := c.Status.Allocation; a != nil && len(c.Status.ReservedFor) > 0 {
			return a.Devices.Results[0].Pool, a.Devices.Results[0].Device
		}
	}
	t.Fatal("no allocated claim")
	return "", ""
}

func taintDevice(t *testing.T, ctx context.Context, h *harness.Harness, pool, device string, effect resourcev1.DeviceTaintEffect) {
	t.Helper()
	name := pool + "-gpu.example.com"
	s, err := h.Client.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := s.Spec.DeepCopy()
	for i := range s.Spec.Devices {
		if s.Spec.Devices[i].Name == device {
			s.Spec.Devices[i].Taints = []resourcev1.DeviceTaint{{Key: "example.com/xid", Value: "79", Effect: effect}}
		}
	}
	if _, err := h.Client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cur, err := h.Client.ResourceV1().ResourceSlices().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			cur.Spec = *orig
			_, _ = h.Client.ResourceV1().ResourceSlices().Update(context.Background(), cur, metav1.UpdateOptions{})
		}
	})
}

// taintRule taints one device through a DeviceTaintRule (resource.k8s.io/v1,
// served by default from 1.37) instead of its ResourceSlice.
func taintRule(t *testing.T, ctx context.Context, h *harness.Harness, pool, device string, effect resourcev1.DeviceTaintEffect) {
	t.Helper()
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "xid-79-"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Pool: ptr.To(pool), Device: ptr.To(device)},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/xid", Value: "79", Effect: effect},
		},
	}
	created, err := h.Client.ResourceV1().DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.ResourceV1().DeviceTaintRules().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
}

func TestNoExecuteDeviceTaintRestartsWholeGang(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taint func(t *testing.T, ctx context.Context, h *harness.Harness, pool, device string, effect resourcev1.DeviceTaintEffect)
	}{
		{"taint in the ResourceSlice", taintDevice},
		{"DeviceTaintRule", taintRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noExecuteRestartsWholeGang(t, tc.taint)
		})
	}
}

func noExecuteRestartsWholeGang(t *testing.T, taint func(t *testing.T, ctx context.Context, h *harness.Harness, pool, device string, effect resourcev1.DeviceTaintEffect)) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	before := gangJob(t, ctx, h, ns, perIndexBackoff)
	pool, device := deviceOf(t, ctx, h, ns)
	taint(t, ctx, h, pool, device, resourcev1.DeviceTaintEffectNoExecute)

	harness.Eventually(t, ctx, "the whole gang restarted on healthy devices", func(ctx context.Context) (bool, string, error) {
		now := runningPods(ctx, h, ns)
		for uid := range now {
			if _, old := before[uid]; old {
				return false, "an original rank still runs", nil
			}
		}
		if len(now) != 4 {
			return false, fmt.Sprintf("%d new ranks running", len(now)), nil
		}
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range claims.Items {
			if a := c.Status.Allocation; a != nil && a.Devices.Results[0].Pool == pool && a.Devices.Results[0].Device == device {
				return false, "", fmt.Errorf("claim %s got the NoExecute-tainted device %s/%s", c.Name, pool, device)
			}
		}
		return true, "", nil
	})
	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.DisruptionTarget)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PodGroup: want a DisruptionTarget condition recording the restart, got %+v", pg.Status.Conditions)
	}
	job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, jc := range job.Status.Conditions {
		if jc.Type == batchv1.JobFailed && jc.Status == corev1.ConditionTrue {
			t.Errorf("the gang restart failed the Job (backoffLimit consumed): %s", jc.Message)
		}
	}
}

func TestNoScheduleDeviceTaintKeepsGangRunning(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	before := gangJob(t, ctx, h, ns)
	pool, device := deviceOf(t, ctx, h, ns)
	taintDevice(t, ctx, h, pool, device, resourcev1.DeviceTaintEffectNoSchedule)
	time.Sleep(8 * time.Second)
	now := runningPods(ctx, h, ns)
	if len(now) != 4 {
		t.Fatalf("want the gang still running, got %d ranks", len(now))
	}
	for uid := range now {
		if _, ok := before[uid]; !ok {
			t.Errorf("a NoSchedule device taint restarted rank %s; it must only stop new allocations", uid)
		}
	}
}

// TestToleratedNoExecuteTaintKeepsGangRunning: a claim that tolerates the
// taint (its request's tolerations, recorded in the allocation) keeps its
// gang running — through the slice and through a DeviceTaintRule — as
// kube-controller-manager's device-taint-eviction controller keeps the pod.
func TestToleratedNoExecuteTaintKeepsGangRunning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taint func(t *testing.T, ctx context.Context, h *harness.Harness, pool, device string, effect resourcev1.DeviceTaintEffect)
	}{
		{"taint in the ResourceSlice", taintDevice},
		{"DeviceTaintRule", taintRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 2*time.Minute)
			tmpl := builders.ClaimTemplate(ns, "tolerant-gpu", "gpu.example.com", 1)
			tmpl.Spec.Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{
				Key: "example.com/xid", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute,
			}}
			if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			before := gangJob(t, ctx, h, ns, func(j *batchv1.Job) {
				j.Spec.Template.Spec.ResourceClaims[0].ResourceClaimTemplateName = ptr.To("tolerant-gpu")
			})
			pool, device := deviceOf(t, ctx, h, ns)
			tc.taint(t, ctx, h, pool, device, resourcev1.DeviceTaintEffectNoExecute)
			time.Sleep(8 * time.Second)
			now := runningPods(ctx, h, ns)
			for uid := range before {
				if _, ok := now[uid]; !ok {
					t.Errorf("a tolerated NoExecute taint took rank %s down", uid)
				}
			}
			h.NoLifecycleRestart(t, ctx, ns, "train")
		})
	}
}
