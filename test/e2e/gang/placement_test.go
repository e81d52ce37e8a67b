package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A leader that fits on one node only (worker-2, 6 or 7 of its 8 CPUs) plus
// GPU workers: placed when a placement exists, not at all when it doesn't.
func TestHeterogeneousGang(t *testing.T) {
	tests := map[string]struct {
		leaderCPU, workerCPU string
		workers              int
		wantBound            int
	}{
		// worker-2 keeps 2 CPUs: 2 workers there, 2 on each other node = 6 ≥ 4.
		"placement exists": {leaderCPU: "6", workerCPU: "1", workers: 4, wantBound: 5},
		// worker-2 keeps 1 CPU, too little for a worker: at most 4 GPUs usable < 6 workers.
		"no placement": {leaderCPU: "7", workerCPU: "1500m", workers: 6, wantBound: 0},
	}
	h := harness.Get(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := h.Namespace(t)
			ctx := harness.Context(t, 2*time.Minute)
			oneGPUTemplate(t, ctx, h, ns)
			size := tc.workers + 1
			h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "job", int32(size)))
			leader := builders.MakePod().Namespace(ns).Name("leader").Member("job").Req(corev1.ResourceCPU, tc.leaderCPU).Obj()
			leader.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "worker-2"}
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, leader, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			gpuMembers(t, ctx, h, ns, "job", tc.workers, tc.workerCPU)
			if tc.wantBound == 0 {
				waitCondition(t, ctx, h, ns, "job", metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable)
				time.Sleep(time.Second)
			} else {
				waitCondition(t, ctx, h, ns, "job", metav1.ConditionTrue, lockv1.PodGroupReasonScheduled)
			}
			pods, bound, err := h.GroupPods(ctx, ns, "job")
			if err != nil {
				t.Fatal(err)
			}
			if bound != tc.wantBound {
				t.Fatalf("want %d bound, got %d", tc.wantBound, bound)
			}
			for _, p := range pods {
				if p.Name == "leader" && bound > 0 && p.Spec.NodeName != "worker-2" {
					t.Errorf("leader on %s, want worker-2", p.Spec.NodeName)
				}
			}
			if bad, err := allocatedToUnbound(ctx, h, ns); err != nil || len(bad) > 0 {
				t.Errorf("devices allocated to unbound pods: %v (err %v)", bad, err)
			}
		})
	}
}

// Lone pods with schedulerName lockstep pass kube-scheduler's filters and get
// kube-scheduler's condition when they don't fit.
func TestLonePodsFilteredLikeKubeScheduler(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	mk := func(name string) *builders.PodWrapper {
		return builders.MakePod().Namespace(ns).Name(name).Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "500m")
	}
	pinned := mk("pinned").Obj()
	pinned.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "worker-1"}
	affine := mk("affine").Obj()
	affine.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"worker-2"}}}}},
	}}}
	nowhere := mk("nowhere").Obj()
	nowhere.Spec.NodeSelector = map[string]string{"example.com/pool": "missing"}
	huge := mk("huge").Req(corev1.ResourceCPU, "64").Obj()
	withPort := mk("port").Obj()
	withPort.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	for _, p := range []*corev1.Pod{pinned, affine, nowhere, huge, withPort} {
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wantNode := map[string]string{"pinned": "worker-1", "affine": "worker-2", "port": "*"}
	wantMsg := map[string]string{
		"nowhere": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector",
		"huge":    "0/3 nodes are available: 3 Insufficient cpu",
	}
	harness.Eventually(t, ctx, "lone pods placed or explained", func(ctx context.Context) (bool, string, error) {
		var notYet []string
		for name, node := range wantNode {
			p, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if p.Spec.NodeName == "" || node != "*" && p.Spec.NodeName != node {
				notYet = append(notYet, fmt.Sprintf("%s on %q", name, p.Spec.NodeName))
			}
		}
		for name, msg := range wantMsg {
			p, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if p.Spec.NodeName != "" {
				return false, "", fmt.Errorf("pod %s must not be placed, got %s", name, p.Spec.NodeName)
			}
			if c := podgroup.PodCondition(p, corev1.PodScheduled); c == nil || c.Reason != corev1.PodReasonUnschedulable || c.Message != msg {
				notYet = append(notYet, fmt.Sprintf("%s condition %+v", name, c))
			}
		}
		return len(notYet) == 0, strings.Join(notYet, "; "), nil
	})
	// A second pod on the same host port goes to another node.
	second := mk("port-2").Obj()
	second.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "port-2 placed apart from port", func(ctx context.Context) (bool, string, error) {
		a, err := h.Client.CoreV1().Pods(ns).Get(ctx, "port", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		b, err := h.Client.CoreV1().Pods(ns).Get(ctx, "port-2", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if b.Spec.NodeName != "" && b.Spec.NodeName == a.Spec.NodeName {
			return false, "", fmt.Errorf("two pods with host port 8080 on %s", a.Spec.NodeName)
		}
		return b.Spec.NodeName != "", "port-2 unbound", nil
	})
}

// A basic group places pods one by one and reports on the group.
func TestBasicGroupPlacesWhatFits(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	// 3 pods of 6 CPUs on 3 nodes of 8 CPUs each, plus one that cannot fit anywhere.
	for i := 0; i < 3; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("basic-%d", i)).Member("basic").Req(corev1.ResourceCPU, "6").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	big := builders.MakePod().Namespace(ns).Name("basic-big").Member("basic").Req(corev1.ResourceCPU, "9").Obj()
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The group comes last, so its first cycle sees all four pods.
	pg := builders.GangPodGroup(ns, "basic", 1)
	pg.Spec.SchedulingPolicy = lockv1.PodGroupSchedulingPolicy{Basic: &lockv1.BasicSchedulingPolicy{}}
	h.CreatePodGroup(ctx, t, pg)
	waitBound(t, ctx, h, ns, "basic", 3)
	// The group is admitted (a basic group binds what fits); the pod that
	// fits nowhere says so itself.
	harness.Eventually(t, ctx, "group condition counting 3 of 4", func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, "basic")
		if err != nil || c == nil {
			return false, "no condition", err
		}
		want := "3 of 4 pods placed (minCount 1)"
		return c.Reason == lockv1.PodGroupReasonScheduled && c.Message == want, c.Reason + ": " + c.Message, nil
	})
	harness.Eventually(t, ctx, "the pod that fits nowhere says why", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "basic-big", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c := podgroup.PodCondition(p, corev1.PodScheduled)
		if c == nil {
			return false, "no condition", nil
		}
		return c.Reason == corev1.PodReasonUnschedulable && c.Message == "PodGroup basic: this pod does not fit: Insufficient cpu", c.Reason + ": " + c.Message, nil
	})
}
