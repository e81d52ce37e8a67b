package autoscaling

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var nodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// A NodeClaim becomes a Ready node with its GPUs published, a launch on an
// offering with no capacity left fails as Karpenter's insufficient
// capacity, and deleting the NodeClaim takes the node and its
// ResourceSlices away. The karpenter-capacity ConfigMap allows one gpu-8x
// in zone-a and none in zone-b: the first launch takes zone-a's last, the
// second (pinned to zone-b) fails.
func TestNodeClaimLaunchesGPUNodeAndFailsWithoutCapacity(t *testing.T) {
	h := helper{harness.Get(t)}
	ctx := harness.Context(t, 5*time.Minute)
	capacity := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: devcluster.KarpenterCapacityConfigMap, Namespace: devcluster.KarpenterController.Namespace},
		Data:       map[string]string{"gpu-8x.zone-a": "1", "gpu-8x.zone-b": "0"},
	}
	if _, err := h.Client.CoreV1().ConfigMaps(capacity.Namespace).Create(ctx, capacity, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.CoreV1().ConfigMaps(capacity.Namespace).Delete(context.Background(), capacity.Name, metav1.DeleteOptions{})
	})

	start := time.Now()
	h.createNodeClaim(ctx, t, "smoke-zone-a", "gpu-8x", "zone-a")
	var node string
	harness.Eventually(t, ctx, "the NodeClaim's node is Ready and the NodeClaim Initialized and Ready", func(ctx context.Context) (bool, string, error) {
		nc, err := h.Dynamic.Resource(nodeClaims).Get(ctx, "smoke-zone-a", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		node, _, _ = unstructured.NestedString(nc.Object, "status", "nodeName")
		if node == "" {
			return false, "no status.nodeName; conditions " + conditions(nc), nil
		}
		n, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if !nodeReady(n) || !conditionTrue(nc, "Initialized") || !conditionTrue(nc, "Ready") {
			return false, fmt.Sprintf("node %s ready %v; NodeClaim conditions %s", node, nodeReady(n), conditions(nc)), nil
		}
		return true, "", nil
	})
	t.Logf("NodeClaim to Ready node %s and Ready NodeClaim: %v", node, time.Since(start).Round(100*time.Millisecond))
	n, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Labels[corev1.LabelTopologyZone] + "/" + n.Labels[corev1.LabelInstanceTypeStable]; got != "zone-a/gpu-8x" {
		t.Errorf("node %s is %s, want zone-a/gpu-8x", node, got)
	}
	if cpu := n.Status.Capacity.Cpu(); cpu.Cmp(resource.MustParse("96")) != 0 {
		t.Errorf("node %s has capacity cpu %s, want gpu-8x's 96", node, cpu)
	}
	harness.Eventually(t, ctx, "8 devices of gpu.example.com published for the node", func(ctx context.Context) (bool, string, error) {
		n, err := h.devices(ctx, node)
		return n == 8, fmt.Sprintf("%d devices", n), err
	})
	t.Logf("NodeClaim to its node's ResourceSlices: %v", time.Since(start).Round(100*time.Millisecond))
	harness.Eventually(t, ctx, "the launch took zone-a's last gpu-8x", func(ctx context.Context) (bool, string, error) {
		cm, err := h.Client.CoreV1().ConfigMaps(capacity.Namespace).Get(ctx, capacity.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return cm.Data["gpu-8x.zone-a"] == "0", fmt.Sprintf("data %v", cm.Data), nil
	})

	h.createNodeClaim(ctx, t, "smoke-zone-b", "gpu-8x", "zone-b")
	harness.Eventually(t, ctx, "the zone-b launch fails for lack of capacity and Karpenter deletes its NodeClaim", func(ctx context.Context) (bool, string, error) {
		evs, err := h.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=smoke-zone-b,reason=InsufficientCapacityError"})
		if err != nil {
			return false, "", err
		}
		nc, err := h.Dynamic.Resource(nodeClaims).Get(ctx, "smoke-zone-b", metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && len(evs.Items) > 0:
			t.Logf("zone-b launch: %s", evs.Items[0].Message)
			return true, "", nil
		case apierrors.IsNotFound(err):
			return false, "NodeClaim deleted, no InsufficientCapacityError event", nil
		case err != nil:
			return false, "", err
		}
		return false, fmt.Sprintf("%d events; NodeClaim conditions %s", len(evs.Items), conditions(nc)), nil
	})
	if nodes, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelHostname + "=smoke-zone-b"}); err != nil {
		t.Fatal(err)
	} else if len(nodes.Items) > 0 {
		t.Errorf("the failed launch made node %s", nodes.Items[0].Name)
	}

	start = time.Now()
	if err := h.Dynamic.Resource(nodeClaims).Delete(ctx, "smoke-zone-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the node, its ResourceSlices and the NodeClaim gone", func(ctx context.Context) (bool, string, error) {
		_, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, "node still there", client(err)
		}
		if n, err := h.devices(ctx, node); err != nil || n > 0 {
			return false, fmt.Sprintf("%d devices still published", n), err
		}
		_, err = h.Dynamic.Resource(nodeClaims).Get(ctx, "smoke-zone-a", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "NodeClaim still there", client(err)
	})
	t.Logf("NodeClaim deletion to node and slices gone: %v", time.Since(start).Round(100*time.Millisecond))
}

// client is err unless it is NotFound, which the polls above wait for.
func client(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// helper wraps the harness for this file's helpers.
type helper struct{ *harness.Harness }

// createNodeClaim creates a NodeClaim of the KWOKNodeClass for one
// on-demand instance type in one zone, deleted when the test ends.
func (h helper) createNodeClaim(ctx context.Context, t *testing.T, name, instanceType, zone string) {
	t.Helper()
	nc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": devcluster.KarpenterNodeClass},
			"requirements": []any{
				requirement(corev1.LabelInstanceTypeStable, instanceType),
				requirement(corev1.LabelTopologyZone, zone),
				requirement("karpenter.sh/capacity-type", "on-demand"),
			},
		},
	}}
	if _, err := h.Dynamic.Resource(nodeClaims).Create(ctx, nc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating NodeClaim %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = h.Dynamic.Resource(nodeClaims).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func requirement(key, value string) map[string]any {
	return map[string]any{"key": key, "operator": "In", "values": []any{value}}
}

// devices counts the devices of gpu.example.com published for node.
func (h helper) devices(ctx context.Context, node string) (int, error) {
	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range slices.Items {
		if s.Spec.Driver == devcluster.KarpenterGPUDriver {
			n += len(s.Spec.Devices)
		}
	}
	return n, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	cs, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

// conditions is obj's conditions in one line, for failure messages.
func conditions(obj *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	out := ""
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			out += fmt.Sprintf("[%v=%v %v: %v] ", m["type"], m["status"], m["reason"], m["message"])
		}
	}
	return out
}
