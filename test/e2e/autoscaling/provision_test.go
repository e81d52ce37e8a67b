package autoscaling

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/internal/provision"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// eightGPUs is a ResourceClaimTemplate of 8 GPUs: one rank takes a gpu-8x
// node whole.
const eightGPUs = "eight-gpus"

// gang creates PodGroup name (minCount n, required in one zone) and its n
// ranks of 8 GPUs each, gated by gates when given.
func (h helper) gang(ctx context.Context, t testing.TB, ns, name string, n int, gates ...string) {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, eightGPUs, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, eightGPUs, devcluster.KarpenterGPUDriver, 8), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.CreatePodGroup(ctx, t, builders.MakePodGroup().Namespace(ns).Name(name).MinCount(int32(n)).Topology(corev1.LabelTopologyZone).Obj())
	for i := range n {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", name, i)).Scheduler(lockv1.SchedulerName).Member(name).ClaimTemplate("gpu", eightGPUs).Obj()
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// boundNodes waits until the gang's n pods are bound and returns their
// nodes, sorted.
func (h helper) boundNodes(ctx context.Context, t testing.TB, ns, group string, n int) []string {
	t.Helper()
	var nodes []string
	harness.Eventually(t, ctx, fmt.Sprintf("the %d ranks of %s bound", n, group), func(ctx context.Context) (bool, string, error) {
		pods, bound, err := h.GroupPods(ctx, ns, group)
		if err != nil {
			return false, "", err
		}
		nodes = nodes[:0]
		var why []string
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				nodes = append(nodes, p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					why = append(why, p.Name+": "+c.Reason+": "+c.Message)
				}
			}
		}
		return bound == n, fmt.Sprintf("%d bound; %s", bound, strings.Join(why, " | ")), nil
	})
	sort.Strings(nodes)
	return nodes
}

// claimsOf lists the NodeClaims; lockstepOnly keeps Lockstep's.
func (h helper) claims(ctx context.Context, t testing.TB) (ours, theirs []unstructured.Unstructured) {
	t.Helper()
	l, err := h.Dynamic.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range l.Items {
		if nc.GetLabels()[provision.CreatedByLabel] == provision.CreatedBy {
			ours = append(ours, nc)
		} else {
			theirs = append(theirs, nc)
		}
	}
	return ours, theirs
}

func (h helper) zoneOf(ctx context.Context, t testing.TB, node string) string {
	t.Helper()
	n, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[corev1.LabelTopologyZone] + "/" + n.Labels[corev1.LabelInstanceTypeStable]
}

// setCapacity writes the karpenter-capacity ConfigMap (launches left per
// "<type>.<zone>"), removed when the test ends.
func (h helper) setCapacity(ctx context.Context, t testing.TB, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: devcluster.KarpenterCapacityConfigMap, Namespace: devcluster.KarpenterController.Namespace}, Data: data}
	_ = h.Client.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{})
	if _, err := h.Client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.CoreV1().ConfigMaps(cm.Namespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
}

// waitNoNodeClaims waits until every NodeClaim (and so every launched
// node) is gone: each test starts on the 2 CPU nodes alone.
func (h helper) waitNoNodeClaims(ctx context.Context, t testing.TB) {
	t.Helper()
	harness.Eventually(t, ctx, "no NodeClaim left", func(ctx context.Context) (bool, string, error) {
		ours, theirs := h.claims(ctx, t)
		return len(ours)+len(theirs) == 0, fmt.Sprintf("%d of Lockstep's, %d of Karpenter's", len(ours), len(theirs)), nil
	})
}

// provisioning waits until Lockstep's scheduler watches Karpenter's
// NodeClaims: Karpenter is installed after it starts, and discovery is
// asked every 10 s.
func (h helper) provisioning(ctx context.Context, t testing.TB) {
	t.Helper()
	harness.Eventually(t, ctx, "the scheduler watching NodeClaims", func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.Cluster.SchedulerMetricsURL(), nil)
		if err != nil {
			return false, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		want := `lockstep_scheduler_kind_served{resource="nodeclaims.karpenter.sh"} 1`
		return strings.Contains(string(b), want), "no " + want, err
	})
}

// A 2-rank gang of 8 GPUs a rank, required in one zone, on a cluster with
// no GPU: Lockstep asks Karpenter for 2 gpu-8x nodes in one zone as one
// request, Karpenter launches nothing pod by pod, and the gang binds whole
// on them. While it runs, consolidation (10 s after a node is
// underutilized) leaves its nodes alone; once it ends, they are removed.
func TestGangGetsItsNodesWholeAndKeepsThemWhileItRuns(t *testing.T) {
	h := helper{harness.Get(t)}
	ctx := harness.Context(t, 8*time.Minute)
	h.provisioning(ctx, t)
	ns := h.Namespace(t)
	start := time.Now()
	h.gang(ctx, t, ns, "train", 2)
	nodes := h.boundNodes(ctx, t, ns, "train", 2)
	t.Logf("gang created to bound on new nodes: %v", time.Since(start).Round(100*time.Millisecond))
	if len(nodes) != 2 || nodes[0] == nodes[1] {
		t.Fatalf("ranks on %v, want 2 nodes", nodes)
	}
	if a, b := h.zoneOf(ctx, t, nodes[0]), h.zoneOf(ctx, t, nodes[1]); a != b || !strings.HasSuffix(a, "/gpu-8x") {
		t.Errorf("ranks on %s and %s, want 2 gpu-8x nodes of one zone", a, b)
	}
	ours, theirs := h.claims(ctx, t)
	if len(ours) != 2 || len(theirs) != 0 {
		t.Errorf("NodeClaims: %d of Lockstep's, %d of Karpenter's own provisioning; want 2 and 0", len(ours), len(theirs))
	}
	for _, nc := range ours {
		taints, _, _ := unstructured.NestedSlice(nc.Object, "spec", "taints")
		if !strings.Contains(fmt.Sprint(taints), lockv1.ReservedForTaint) {
			t.Errorf("NodeClaim %s taints %v, want the gang's reservation (no other pod takes its node before the gang binds)", nc.GetName(), taints)
		}
	}
	harness.Eventually(t, ctx, "the gang's NodeClaims and nodes let go of do-not-disrupt and the reservation once it bound", func(ctx context.Context) (bool, string, error) {
		ours, _ := h.claims(ctx, t)
		for _, nc := range ours {
			if v, ok := nc.GetAnnotations()[provision.DoNotDisruptAnnotation]; ok {
				return false, fmt.Sprintf("NodeClaim %s do-not-disrupt=%s", nc.GetName(), v), nil
			}
		}
		for _, n := range nodes {
			node, err := h.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if v, ok := node.Annotations[provision.DoNotDisruptAnnotation]; ok {
				return false, fmt.Sprintf("node %s do-not-disrupt=%s", n, v), nil
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == lockv1.ReservedForTaint {
					return false, fmt.Sprintf("node %s still reserved", n), nil
				}
			}
		}
		return true, "", nil
	})
	pods, _, err := h.GroupPods(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Annotations[provision.DoNotDisruptAnnotation] != "true" {
			t.Errorf("running rank %s without karpenter.sh/do-not-disrupt", p.Name)
		}
	}

	// Consolidation runs 10 s after a node is underutilized: the running
	// gang keeps its nodes through several passes.
	time.Sleep(40 * time.Second)
	for _, n := range nodes {
		if _, err := h.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s of the running gang: %v", n, err)
		}
	}
	if ours, _ := h.claims(ctx, t); len(ours) != 2 {
		t.Errorf("%d NodeClaims while the gang runs, want its 2", len(ours))
	}

	// The gang ends: its nodes go. (Deleting one rank restarts the gang
	// whole: Lockstep deletes the other.)
	for _, p := range pods {
		if err := h.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); client(err) != nil {
			t.Fatal(err)
		}
	}
	ended := time.Now()
	h.waitNoNodeClaims(ctx, t)
	t.Logf("gang ended to its nodes consolidated: %v", time.Since(ended).Round(100*time.Millisecond))
}

// Zone-a has one gpu-8x left: the request for 2 there gets one node and
// one launch that fails. Lockstep releases the whole set (no node of it
// stays), asks zone-b, and the gang binds whole there; its group says
// what failed.
func TestZoneOutOfCapacityReleasesThePartialSet(t *testing.T) {
	h := helper{harness.Get(t)}
	ctx := harness.Context(t, 8*time.Minute)
	h.provisioning(ctx, t)
	h.waitNoNodeClaims(ctx, t)
	h.setCapacity(ctx, t, map[string]string{"gpu-8x.zone-a": "1"})
	ns := h.Namespace(t)
	h.gang(ctx, t, ns, "train", 2)
	nodes := h.boundNodes(ctx, t, ns, "train", 2)
	for _, n := range nodes {
		if z := h.zoneOf(ctx, t, n); z != "zone-b/gpu-8x" {
			t.Errorf("rank on %s (%s), want zone-b/gpu-8x", n, z)
		}
	}
	ours, theirs := h.claims(ctx, t)
	if len(ours) != 2 || len(theirs) != 0 {
		t.Errorf("NodeClaims: %d of Lockstep's, %d of Karpenter's own; want the 2 of zone-b", len(ours), len(theirs))
	}
	harness.Eventually(t, ctx, "no node left in zone-a", func(ctx context.Context) (bool, string, error) {
		l, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelTopologyZone + "=zone-a," + corev1.LabelInstanceTypeStable + "=gpu-8x"})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 0, fmt.Sprintf("%d gpu-8x nodes in zone-a", len(l.Items)), nil
	})
	evs, err := h.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ProvisioningFailed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Note, "gpu-8x in zone-a (on-demand) from NodePool gpu failed") {
		t.Errorf("ProvisioningFailed events %v, want the zone-a request's failure", evs.Items)
	}
	for _, p := range []string{"train-0", "train-1"} {
		_ = h.Client.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	h.waitNoNodeClaims(ctx, t)
}

// A gang its scheduling gates hold is no demand: no NodeClaim, no node,
// its pods never Unschedulable. Nor is a gang that fits on the nodes that
// exist (it binds there; nothing is launched).
func TestGatedGangLaunchesNothing(t *testing.T) {
	h := helper{harness.Get(t)}
	ctx := harness.Context(t, 3*time.Minute)
	h.provisioning(ctx, t)
	h.waitNoNodeClaims(ctx, t)
	ns := h.Namespace(t)
	h.gang(ctx, t, ns, "held", 2, "example.com/hold")
	// Beside it, a gang that fits on the CPU nodes that exist.
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "fits", 2))
	for i := range 2 {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("fits-%d", i)).Scheduler(lockv1.SchedulerName).Member("fits").Req(corev1.ResourceCPU, "1").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.boundNodes(ctx, t, ns, "fits", 2)
	// Karpenter batches pending pods for up to 10 s before it launches.
	time.Sleep(20 * time.Second)
	if ours, theirs := h.claims(ctx, t); len(ours)+len(theirs) != 0 {
		t.Errorf("a gated gang and a gang that fits caused %d NodeClaims of Lockstep's and %d of Karpenter's", len(ours), len(theirs))
	}
	pods, _, err := h.GroupPods(ctx, ns, "held")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				t.Errorf("gated %s is Unschedulable: %s", p.Name, c.Message)
			}
		}
	}
}
