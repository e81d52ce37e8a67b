package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/preflight"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var nodePools sync.Once

// installNodePools serves a stand-in for Karpenter's NodePool API with the
// NodePools of examples/clusters/eks.yaml (testdata), so preflight can tell
// the static pool from the dynamic ones.
func installNodePools(t *testing.T, h *harness.Harness) {
	nodePools.Do(func() {
		ctx := harness.Context(t, time.Minute)
		harness.Eventually(t, ctx, "NodePools created", func(ctx context.Context) (bool, string, error) {
			out, err := exec.CommandContext(ctx, filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", h.Kubeconfig,
				"apply", "-f", filepath.Join("testdata", "karpenter-nodepools.yaml")).CombinedOutput()
			return err == nil, string(out), nil
		})
	})
}

// result is one run of `lockstep preflight -o json`.
type result struct {
	exit   int
	report preflight.Report
	checks map[string]preflight.Check
}

func runPreflight(t *testing.T, h *harness.Harness, format string) (int, []byte) {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.BinDir, "lockstep"), "preflight", "--kubeconfig", h.Kubeconfig, "-o", format)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.Bytes()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.Bytes()
	}
	t.Fatalf("running preflight: %v; stderr: %s", err, errOut.String())
	return 0, nil
}

func preflightJSON(t *testing.T, h *harness.Harness) result {
	t.Helper()
	code, out := runPreflight(t, h, "json")
	r := result{exit: code, checks: map[string]preflight.Check{}}
	if err := json.Unmarshal(out, &r.report); err != nil {
		t.Fatalf("decoding -o json: %v\n%s", err, out)
	}
	for _, c := range r.report.Checks {
		r.checks[c.Name] = c
	}
	return r
}

// complaints are the checks that warned or failed, and the oversubscription risks.
func complaints(r result) []string {
	var out []string
	for _, c := range r.report.Checks {
		if c.Status == preflight.Warn || c.Status == preflight.Fail {
			out = append(out, c.Name+": "+string(c.Status)+": "+c.Detail)
		}
	}
	for _, o := range r.report.Overlaps {
		out = append(out, "oversubscription risk: "+o.Node+" "+o.ExtendedResource)
	}
	return out
}

func TestPreflightPassesACorrectlyConfiguredEKSCluster(t *testing.T) {
	h := harness.Get(t)
	installNodePools(t, h)
	r := preflightJSON(t, h)
	if diff := cmp.Diff([]string(nil), complaints(r)); diff != "" {
		t.Errorf("a correctly configured cluster: want no warning and no failure (-want,+got):\n%s", diff)
	}
	if r.exit != 0 {
		t.Errorf("exit code: want 0, got %d", r.exit)
	}
	for _, name := range []string{"Lockstep CRDs", "Lockstep webhooks", "Lockstep scheduler", "Lockstep controllers", preflight.CheckDRASupply, preflight.CheckEFA, preflight.CheckBottlerocket, preflight.CheckSpot, preflight.CheckAlignment} {
		if c := r.checks[name]; c.Status != preflight.OK {
			t.Errorf("%s: want ok, got %+v", name, c)
		}
	}
	if c := r.checks[preflight.CheckJobField]; !strings.Contains(c.Detail, "pruned silently") {
		t.Errorf("Job field on the eks profile: want pruned, got %+v", c)
	}
	if c := r.checks[preflight.CheckAlignment]; !strings.HasPrefix(c.Detail, "3 nodes with accelerators and EFA both on DRA") {
		t.Errorf("alignment: want the 2 p5 and the trn1 nodes alignable, got %q", c.Detail)
	}
	var notServed []string
	for _, f := range r.report.DRAFeatures {
		if f.Cluster != preflight.Served {
			notServed = append(notServed, f.Feature+": "+f.Cluster+" ("+f.Evidence+")")
		}
	}
	if len(r.report.DRAFeatures) != 7 || len(notServed) > 0 {
		t.Errorf("DRA features: want all 7 served by a 1.37 API server at its defaults, got %d rows, not served: %v", len(r.report.DRAFeatures), notServed)
	}
	pools := map[string]string{}
	for _, p := range r.report.Pools {
		pools[p.SupplyModel+"/"+p.Name] = p.Recommendation
	}
	want := map[string]string{
		"EKS managed node group/p5-dra":             "DRA driver",
		"EKS managed node group/trn1-dra":           "DRA driver",
		"Karpenter (static capacity)/reserved-l40s": "DRA driver",
		"Karpenter (dynamic capacity)/spot-gpus":    "device plugin",
		"EKS Auto Mode/general-purpose":             "device plugin",
	}
	if diff := cmp.Diff(want, pools); diff != "" {
		t.Errorf("node pools (-want,+got):\n%s", diff)
	}
	if code, table := runPreflight(t, h, "table"); code == 0 {
		t.Logf("preflight on a correctly configured cluster:\n%s", table)
	}
}

// TestPreflightCatchesEachMisconfiguration makes one misconfiguration at a
// time on the correctly configured cluster, checks preflight names it (its
// check, status, nodes and exit code), and undoes it; at the end the
// cluster passes again.
func TestPreflightCatchesEachMisconfiguration(t *testing.T) {
	h := harness.Get(t)
	installNodePools(t, h)
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, ctx context.Context, h *harness.Harness)
		check  string
		want   preflight.Status
		nodes  []string
		exit   int
	}{
		{name: "a Spot node gangs can land on", check: preflight.CheckSpot, want: preflight.Warn, nodes: []string{"spot-0"},
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) {
				updateNode(t, ctx, h, "spot-0", func(n *corev1.Node) { n.Spec.Taints = nil })
			}},
		{name: "a Spot GPU pool tainted with its own resource, which GPU pods tolerate", check: preflight.CheckSpot, want: preflight.Warn, nodes: []string{"spot-0"},
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) {
				updateNode(t, ctx, h, "spot-0", func(n *corev1.Node) {
					n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
				})
			}},
		{name: "a p5 node without EFA", check: preflight.CheckEFA, want: preflight.Warn, nodes: []string{"p5-0"},
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) { deleteSlice(t, ctx, h, "p5-0-dra.net") }},
		{name: "a DRA driver on an Auto Mode node", check: preflight.CheckDRASupply, want: preflight.Fail, nodes: []string{"auto-0"}, exit: 1,
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) {
				createSlice(t, ctx, h, "auto-0", "gpu.example.com")
			}},
		{name: "a DRA driver on a dynamic Karpenter node", check: preflight.CheckDRASupply, want: preflight.Fail, nodes: []string{"spot-0"}, exit: 1,
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) {
				createSlice(t, ctx, h, "spot-0", "gpu.example.com")
			}},
		{name: "GPUs on DRA, EFA on the device plugin", check: preflight.CheckAlignment, want: preflight.Fail, nodes: []string{"p5-1"}, exit: 1,
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) {
				deleteSlice(t, ctx, h, "p5-1-dra.net")
				updateNodeStatus(t, ctx, h, "p5-1", func(n *corev1.Node) {
					n.Status.Capacity[preflight.ResourceEFA] = resource.MustParse("32")
					n.Status.Allocatable[preflight.ResourceEFA] = resource.MustParse("32")
				})
			}},
		{name: "Bottlerocket 1.62 on the NVIDIA DRA driver", check: preflight.CheckBottlerocket, want: preflight.Fail, nodes: []string{"br-0 (1.62.0)"}, exit: 1,
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) {
				updateNodeStatus(t, ctx, h, "br-0", func(n *corev1.Node) { n.Status.NodeInfo.OSImage = "Bottlerocket OS 1.62.0 (aws-k8s-1.34-nvidia)" })
			}},
		{name: "the NVIDIA device plugin beside its DRA driver", check: "oversubscription", want: preflight.Fail, nodes: []string{"br-0"}, exit: 1,
			break_: func(t *testing.T, ctx context.Context, h *harness.Harness) {
				updateNodeStatus(t, ctx, h, "br-0", func(n *corev1.Node) {
					n.Status.Capacity["nvidia.com/gpu"] = resource.MustParse("1")
					n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("1")
				})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := harness.Context(t, 2*time.Minute)
			tc.break_(t, ctx, h)
			r := preflightJSON(t, h)
			c := r.checks[tc.check]
			if tc.check == "oversubscription" {
				c = preflight.Check{Status: preflight.OK}
				for _, o := range r.report.Overlaps {
					c.Status, c.Nodes, c.Fix = preflight.Fail, append(c.Nodes, o.Node), o.Fix
				}
			}
			if diff := cmp.Diff([]string{string(tc.want), strings.Join(tc.nodes, ",")}, []string{string(c.Status), strings.Join(c.Nodes, ",")}); diff != "" {
				t.Errorf("%s: status and nodes (-want,+got):\n%s\n%+v", tc.check, diff, c)
			}
			if c.Fix == "" {
				t.Errorf("%s: no fix in %+v", tc.check, c)
			}
			t.Logf("preflight exit %d: %s %s: %s\n  fix: %s", r.exit, tc.check, c.Status, c.Detail, c.Fix)
			if r.exit != tc.exit {
				t.Errorf("exit code: want %d, got %d (complaints: %v)", tc.exit, r.exit, complaints(r))
			}
		})
	}
	t.Run("every misconfiguration undone", func(t *testing.T) {
		r := preflightJSON(t, h)
		if diff := cmp.Diff([]string(nil), complaints(r)); diff != "" || r.exit != 0 {
			t.Errorf("want a pass again (exit %d):\n%s", r.exit, diff)
		}
	})
}

// updateNode changes a node's spec and labels, and puts them back when the test ends.
func updateNode(t *testing.T, ctx context.Context, h *harness.Harness, name string, change func(*corev1.Node)) {
	t.Helper()
	var orig *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := h.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		orig = n.DeepCopy()
		change(n)
		_, err = h.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := h.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec, n.Labels = orig.Spec, orig.Labels
			_, err = h.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Errorf("restoring node %s: %v", name, err)
		}
	})
}

// updateNodeStatus changes a node's status as its kubelet would, and puts
// its capacity, allocatable and OS image back when the test ends.
func updateNodeStatus(t *testing.T, ctx context.Context, h *harness.Harness, name string, change func(*corev1.Node)) {
	t.Helper()
	var orig *corev1.Node
	write := func(ctx context.Context, change func(*corev1.Node)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := h.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if orig == nil {
				orig = n.DeepCopy()
			}
			change(n)
			_, err = h.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
	}
	if err := write(ctx, change); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := write(context.Background(), func(n *corev1.Node) {
			n.Status.Capacity, n.Status.Allocatable, n.Status.NodeInfo.OSImage = orig.Status.Capacity, orig.Status.Allocatable, orig.Status.NodeInfo.OSImage
		})
		if err != nil {
			t.Errorf("restoring node %s status: %v", name, err)
		}
	})
}

// deleteSlice deletes a ResourceSlice, and creates it again when the test ends.
func deleteSlice(t *testing.T, ctx context.Context, h *harness.Harness, name string) {
	t.Helper()
	s, err := h.Client.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Client.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.ObjectMeta = metav1.ObjectMeta{Name: s.Name}
		if _, err := h.Client.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Errorf("restoring slice %s: %v", name, err)
		}
	})
}

// createSlice publishes two devices of driver on node, as a DRA driver's
// DaemonSet would, and deletes them when the test ends.
func createSlice(t *testing.T, ctx context.Context, h *harness.Harness, node, driver string) {
	t.Helper()
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To(node), Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}
	if _, err := h.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Client.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting slice %s: %v", s.Name, err)
		}
	})
}
