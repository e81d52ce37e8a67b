package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A gang with a gated member (spec.schedulingGates) places none of its
// members, allocates no device, and says why; once the gate goes, the
// whole gang is placed.
func TestGatedMemberHoldsBackTheWholeGang(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	oneGPUTemplate(t, ctx, h, ns)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "gated", 3))
	for i := 0; i < 3; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("gated-%d", i)).Member("gated").
			Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
		if i == 2 {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := waitCondition(t, ctx, h, ns, "gated", metav1.ConditionFalse, lockv1.PodGroupReasonSchedulingGated)
	if !strings.Contains(c.Message, "1 members are gated") {
		t.Errorf("condition message %q does not count the gated member", c.Message)
	}
	// Several cycles later still nothing is bound or allocated.
	time.Sleep(3 * time.Second)
	if _, bound, err := h.GroupPods(ctx, ns, "gated"); err != nil || bound != 0 {
		t.Fatalf("want 0 bound while a member is gated, got %d (%v)", bound, err)
	}
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range claims.Items {
		if cl.Status.Allocation != nil {
			t.Errorf("claim %s allocated while its gang waits for a gate", cl.Name)
		}
	}

	p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "gated-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.SchedulingGates = nil
	if _, err := h.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, h, ns, "gated", 3)
	waitCondition(t, ctx, h, ns, "gated", metav1.ConditionTrue, lockv1.PodGroupReasonScheduled)
}

// When a gang does not fit, every pending member — those that found a node
// and were rolled back as much as those that found none — gets
// PodScheduled=False/Unschedulable and a FailedScheduling event, which
// autoscalers read per pod.
func TestEveryMemberOfAnUnplaceableGangSaysWhy(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	const size = 10
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "big", size))
	// 10 × 3 CPUs: some fit on the 8-CPU nodes, never all ten.
	for i := 0; i < size; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("big-%d", i)).Member("big").Req(corev1.ResourceCPU, "3").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, ctx, h, ns, "big", metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable)
	harness.Eventually(t, ctx, "PodScheduled=False and a FailedScheduling event on every member", func(ctx context.Context) (bool, string, error) {
		pods, bound, err := h.GroupPods(ctx, ns, "big")
		if err != nil {
			return false, "", err
		}
		if bound != 0 {
			return false, "", fmt.Errorf("%d members of an unplaceable gang bound", bound)
		}
		evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "FailedScheduling").String()})
		if err != nil {
			return false, "", err
		}
		withEvent := map[string]bool{}
		for _, e := range evs.Items {
			withEvent[e.InvolvedObject.Name] = true
		}
		var missing []string
		for _, p := range pods {
			c := podgroup.PodCondition(&p, corev1.PodScheduled)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable || !strings.Contains(c.Message, "PodGroup big") {
				missing = append(missing, p.Name+" (condition)")
			}
			if !withEvent[p.Name] {
				missing = append(missing, p.Name+" (event)")
			}
		}
		return len(pods) == size && len(missing) == 0, fmt.Sprintf("%d pods; missing %v", len(pods), missing), nil
	})
	// Retried (backoff 1 s doubling to 10 s), the gang writes nothing new:
	// the same message is neither a new status write nor a new event.
	versions := map[string]string{}
	pods, _, err := h.GroupPods(ctx, ns, "big")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		versions[p.Name] = p.ResourceVersion
	}
	countEvents := func() int {
		evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "FailedScheduling").String()})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs.Items {
			n += int(e.Count) + int(ptrCount(e.Series))
		}
		return n
	}
	before := countEvents()
	time.Sleep(8 * time.Second)
	pods, _, err = h.GroupPods(ctx, ns, "big")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if versions[p.Name] != p.ResourceVersion {
			t.Errorf("pod %s was written again although its message did not change", p.Name)
		}
	}
	if after := countEvents(); after != before {
		t.Errorf("FailedScheduling events went from %d to %d although no message changed", before, after)
	}
}

func ptrCount(s *corev1.EventSeries) int32 {
	if s == nil {
		return 0
	}
	return s.Count
}

// Required inter-pod anti-affinity and topology spread are kube-scheduler's
// (its own plugins), inside a gang as for lone pods: members placed earlier
// in a cycle count as existing pods.
func TestGangHonoursPodAffinityAndSpread(t *testing.T) {
	h := harness.Get(t)
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	gang := func(t *testing.T, ctx context.Context, ns, name string, n int, mutate func(*corev1.Pod)) {
		t.Helper()
		h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, name, int32(n)))
		for i := 0; i < n; i++ {
			p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", name, i)).Member(name).Label("app", name).Req(corev1.ResourceCPU, "100m").Obj()
			mutate(p)
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	perNode := func(t *testing.T, ctx context.Context, ns, group string) map[string]int {
		t.Helper()
		pods, _, err := h.GroupPods(ctx, ns, group)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, p := range pods {
			out[p.Spec.NodeName]++
		}
		return out
	}
	antiAffine := func(app string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel(app), TopologyKey: corev1.LabelHostname}}}}
		}
	}

	t.Run("anti-affinity spreads a gang one per node", func(t *testing.T) {
		ns := h.Namespace(t)
		ctx := harness.Context(t, 2*time.Minute)
		gang(t, ctx, ns, "spread", 3, antiAffine("spread"))
		waitBound(t, ctx, h, ns, "spread", 3)
		if got := perNode(t, ctx, ns, "spread"); len(got) != 3 {
			t.Errorf("want one member per node on 3 nodes, got %v", got)
		}
	})
	t.Run("anti-affinity with more members than nodes: the gang waits whole", func(t *testing.T) {
		ns := h.Namespace(t)
		ctx := harness.Context(t, 2*time.Minute)
		gang(t, ctx, ns, "crowd", 4, antiAffine("crowd"))
		c := waitCondition(t, ctx, h, ns, "crowd", metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable)
		if !strings.Contains(c.Message, "didn't match pod anti-affinity rules") {
			t.Errorf("condition %q does not name the anti-affinity", c.Message)
		}
		if _, bound, _ := h.GroupPods(ctx, ns, "crowd"); bound != 0 {
			t.Errorf("want 0 bound, got %d", bound)
		}
	})
	t.Run("hostname spread with maxSkew 1 counts the gang's own members", func(t *testing.T) {
		ns := h.Namespace(t)
		ctx := harness.Context(t, 2*time.Minute)
		gang(t, ctx, ns, "even", 6, func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel("even")}}
		})
		waitBound(t, ctx, h, ns, "even", 6)
		for node, n := range perNode(t, ctx, ns, "even") {
			if n != 2 {
				t.Errorf("node %s has %d members, want 2 on each node", node, n)
			}
		}
	})
	t.Run("zone spread with maxSkew 1 splits the gang over zones", func(t *testing.T) {
		ns := h.Namespace(t)
		ctx := harness.Context(t, 2*time.Minute)
		zones := map[string]string{"worker-0": "zone-a", "worker-1": "zone-a", "worker-2": "zone-b"}
		for node, zone := range zones {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelTopologyZone, zone)
			if _, err := h.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				unset := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, corev1.LabelTopologyZone)
				_, _ = h.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(unset), metav1.PatchOptions{})
			})
		}
		gang(t, ctx, ns, "zoned", 4, func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel("zoned")}}
		})
		waitBound(t, ctx, h, ns, "zoned", 4)
		perZone := map[string]int{}
		for node, n := range perNode(t, ctx, ns, "zoned") {
			perZone[zones[node]] += n
		}
		if perZone["zone-a"] != 2 || perZone["zone-b"] != 2 {
			t.Errorf("members per zone %v, want 2 in each (tight packing alone would put all 4 on one node)", perZone)
		}
	})
	t.Run("required affinity to a running pod puts the gang beside it", func(t *testing.T) {
		ns := h.Namespace(t)
		ctx := harness.Context(t, 2*time.Minute)
		leader := builders.MakePod().Namespace(ns).Name("leader").Scheduler(lockv1.SchedulerName).Label("app", "leader").Req(corev1.ResourceCPU, "100m").Obj()
		leader.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "worker-1"}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, leader, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, ctx, "leader bound", func(ctx context.Context) (bool, string, error) {
			p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "leader", metav1.GetOptions{})
			return err == nil && p.Spec.NodeName != "", "", err
		})
		gang(t, ctx, ns, "follow", 3, func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel("leader"), TopologyKey: corev1.LabelHostname}}}}
		})
		waitBound(t, ctx, h, ns, "follow", 3)
		if got := perNode(t, ctx, ns, "follow"); got["worker-1"] != 3 {
			t.Errorf("want all 3 members on worker-1 beside the leader, got %v", got)
		}
	})
}
