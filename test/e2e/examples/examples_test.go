package examples

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preflight"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// apply runs kubectl apply -n ns -f examples/eks/<file>, as a user would.
func apply(t *testing.T, ctx context.Context, h *harness.Harness, ns, file string) {
	t.Helper()
	path := filepath.Join(h.RepoRoot, "examples", "eks", file)
	out, err := exec.CommandContext(ctx, filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", h.Kubeconfig, "apply", "-n", ns, "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", path, err, out)
	}
}

// placed waits until the namespace has pods pods, all bound, and the
// groups named all admitted.
func placed(t *testing.T, ctx context.Context, h *harness.Harness, ns string, pods int, groups ...string) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("%d pods bound, groups %v admitted", pods, groups), func(ctx context.Context) (bool, string, error) {
		list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if len(list.Items) != pods || bound != pods {
			return false, fmt.Sprintf("%d pods, %d bound", len(list.Items), bound), nil
		}
		for _, g := range groups {
			pg, err := h.PodGroup(ctx, ns, g)
			if err != nil {
				return false, fmt.Sprintf("PodGroup %s: %v", g, err), nil
			}
			if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled); c == nil || c.Status != metav1.ConditionTrue {
				return false, fmt.Sprintf("PodGroup %s not admitted: %+v", g, c), nil
			}
		}
		return true, "", nil
	})
}

// treeAdmitted checks the root CompositePodGroup says its tree is scheduled.
func treeAdmitted(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string) {
	t.Helper()
	u, err := h.Dynamic.Resource(podgroup.CompositeResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CompositePodGroup %s: %v", name, err)
	}
	c, err := podgroup.CompositeFromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, lockv1.CompositePodGroupInitiallyScheduled); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("CompositePodGroup %s not admitted: %+v", name, cond)
	}
}

// deviceInfo is what the slices say of a device: its node and PCIe root.
type deviceInfo struct{ node, root string }

func devices(t *testing.T, ctx context.Context, h *harness.Harness) map[string]deviceInfo {
	t.Helper()
	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]deviceInfo{}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			info := deviceInfo{node: *s.Spec.NodeName}
			if a, ok := d.Attributes[preflight.AttributePCIeRoot]; ok && a.StringValue != nil {
				info.root = *a.StringValue
			}
			out[s.Spec.Driver+"/"+s.Spec.Pool.Name+"/"+d.Name] = info
		}
	}
	return out
}

// claimShape is an allocated claim as the checks read it: how many devices
// of each request, on how many nodes and PCIe roots.
type claimShape struct {
	Requests     string
	Nodes, Roots int
}

// shapes describes every allocated claim of the namespace.
func shapes(t *testing.T, ctx context.Context, h *harness.Harness, ns string) []claimShape {
	t.Helper()
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := devices(t, ctx, h)
	var out []claimShape
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			t.Errorf("claim %s not allocated", c.Name)
			continue
		}
		out = append(out, shapeOf(c.Status.Allocation.Devices.Results, info))
	}
	return out
}

func shapeOf(results []resourcev1.DeviceRequestAllocationResult, info map[string]deviceInfo) claimShape {
	perRequest := map[string]int{}
	nodes, roots := map[string]bool{}, map[string]bool{}
	for _, r := range results {
		perRequest[r.Request]++
		d := info[r.Driver+"/"+r.Pool+"/"+r.Device]
		nodes[d.node], roots[d.root] = true, true
	}
	var reqs []string
	for r, n := range perRequest {
		reqs = append(reqs, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(reqs)
	return claimShape{Requests: strings.Join(reqs, ","), Nodes: len(nodes), Roots: len(roots)}
}

// all is n copies of s.
func all(n int, s claimShape) []claimShape {
	out := make([]claimShape, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestExamples(t *testing.T) {
	aligned := claimShape{Requests: "efa=4,gpu=1", Nodes: 1, Roots: 1}
	for _, tc := range []struct {
		file   string
		pods   int
		groups []string
		root   string // the scheduling tree's CompositePodGroup, if the job is one
		claims []claimShape
	}{
		{file: "ddp-job.yaml", pods: 8, groups: []string{"ddp"}, claims: all(8, aligned)},
		{file: "ddp-whole-node-job.yaml", pods: 2, groups: []string{"ddp-nodes"}, claims: append(all(2, claimShape{Requests: "efa=32", Nodes: 1, Roots: 8}), all(2, claimShape{Requests: "gpus=8", Nodes: 1, Roots: 8})...)},
		{file: "mpijob.yaml", pods: 3, groups: []string{"allreduce"}, claims: all(2, aligned)},
		// Workers may scale above minReplicas: a tree (root "ray"), the head never left out.
		{file: "raycluster.yaml", pods: 3, groups: []string{"ray-head", "ray-gpu"}, root: "ray", claims: all(2, aligned)},
		{file: "lws-serving.yaml", pods: 4, groups: []string{"serve-0", "serve-1"}, claims: all(4, aligned)},
		{file: "neuron-job.yaml", pods: 4, groups: []string{"neuron"}, claims: all(4, claimShape{Requests: "efa=1,neuron=2", Nodes: 1, Roots: 1})},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, 4*time.Minute)
			apply(t, ctx, h, ns, "claim-templates.yaml")
			apply(t, ctx, h, ns, tc.file)
			placed(t, ctx, h, ns, tc.pods, tc.groups...)
			if tc.root != "" {
				treeAdmitted(t, ctx, h, ns, tc.root)
			}
			got := shapes(t, ctx, h, ns)
			sort.Slice(got, func(i, j int) bool { return got[i].Requests < got[j].Requests })
			if diff := cmp.Diff(tc.claims, got); diff != "" {
				t.Errorf("claims: devices per request, nodes, PCIe roots (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNeuronGroupOfFour: the connected-group template gives a rank 4
// Neuron devices of one connected group (resource.aws.com/devicegroup4_id).
func TestNeuronGroupOfFour(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	apply(t, ctx, h, ns, "claim-templates.yaml")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "group", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:  lockv1.SchedulerName,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "neuron", ResourceClaimTemplateName: ptrTo("neuron-group-of-4")}},
			Containers:     []corev1.Container{{Name: "main", Image: "sim", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "neuron"}}}}},
		},
	}
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	placed(t, ctx, h, ns, 1)
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 1 {
		t.Fatalf("want 1 claim, got %v (err %v)", claims, err)
	}
	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	group := map[string]int64{}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			if a, ok := d.Attributes["resource.aws.com/devicegroup4_id"]; ok {
				group[s.Spec.Pool.Name+"/"+d.Name] = *a.IntValue
			}
		}
	}
	seen := map[int64]bool{}
	for _, r := range claims.Items[0].Status.Allocation.Devices.Results {
		seen[group[r.Pool+"/"+r.Device]] = true
	}
	if n := len(claims.Items[0].Status.Allocation.Devices.Results); n != 4 || len(seen) != 1 {
		t.Errorf("want 4 devices of one connected group, got %d devices in groups %v", n, seen)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestAllEFAWithOneAcceleratorIsNeverPlaced documents the pitfalls
// docs/install.md warns of, with allocationMode All on the EFA request of a
// per-accelerator rank: All takes every EFA interface the class matches on
// the node — on a p5 that is 32, which with the GPU exceeds the 32 devices a
// claim may hold (a scheduler error naming the limit); on a trn1, 8
// interfaces on 8 PCIe roots, which a matchAttribute on the root can never
// hold for: the allocator must take every device of an All request, so it
// refuses the claim (a scheduler error naming the constraint) rather than
// finding it merely does not fit.
func TestAllEFAWithOneAcceleratorIsNeverPlaced(t *testing.T) {
	for _, tc := range []struct {
		name, class, reason, message string
	}{
		{name: "GPU on a p5", class: "gpu.nvidia.com", reason: "SchedulerError", message: "exceeds the claim limit of 32"},
		{name: "Neuron device on a trn1", class: "neuron.aws.com", reason: "SchedulerError", message: "a claim constraint would not be satisfied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.Get(t)
			ns := h.Namespace(t)
			ctx := harness.Context(t, time.Minute)
			tmpl := &resourcev1.ResourceClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: "one-and-all-efa", Namespace: ns},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{
						{Name: "acc", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: tc.class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}},
						{Name: "efa", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: preflight.ClassEFA, AllocationMode: resourcev1.DeviceAllocationModeAll}},
					},
					Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"acc", "efa"}, MatchAttribute: ptrTo(resourcev1.FullyQualifiedName(preflight.AttributePCIeRoot))}},
				}}},
			}
			if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "rank", Namespace: ns},
				Spec: corev1.PodSpec{
					SchedulerName:  lockv1.SchedulerName,
					ResourceClaims: []corev1.PodResourceClaim{{Name: "net", ResourceClaimTemplateName: ptrTo("one-and-all-efa")}},
					Containers:     []corev1.Container{{Name: "main", Image: "sim", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "net"}}}}},
				},
			}
			if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, ctx, "the rank judged and not placed", func(ctx context.Context) (bool, string, error) {
				p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "rank", metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				if p.Spec.NodeName != "" {
					return false, "", fmt.Errorf("placed on %s", p.Spec.NodeName)
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
						return c.Reason == tc.reason && strings.Contains(c.Message, tc.message), c.Reason + ": " + c.Message, nil
					}
				}
				return false, "not judged yet", nil
			})
		})
	}
}
