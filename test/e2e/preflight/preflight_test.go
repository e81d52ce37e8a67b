package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-dev/lockstep/internal/preflight"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// installKarpenterNodePools serves a minimal karpenter.sh/v1 NodePool API and
// creates one static (spec.replicas) and one dynamic pool.
func installKarpenterNodePools(t *testing.T, h *harness.Harness) {
	ctx := harness.Context(t, time.Minute)
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "nodepools.karpenter.sh"},
		"spec": map[string]any{
			"group": "karpenter.sh", "scope": "Cluster",
			"names": map[string]any{"plural": "nodepools", "singular": "nodepool", "kind": "NodePool"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true, "schema": map[string]any{
				"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			}}},
		},
	}}
	crds := h.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pools := h.Dynamic.Resource(schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"})
	for name, spec := range map[string]map[string]any{"reserved-gpus": {"replicas": int64(1)}, "spot-gpus": {}} {
		np := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": name}, "spec": spec}}
		harness.Eventually(t, ctx, "NodePool API served", func(ctx context.Context) (bool, string, error) {
			_, err := pools.Create(ctx, np, metav1.CreateOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
	}
}

func TestPreflightOnEKSLabelledCluster(t *testing.T) {
	h := harness.Get(t)
	installKarpenterNodePools(t, h)
	cmd := exec.Command(filepath.Join(h.BinDir, "lockstep"), "preflight", "--kubeconfig", h.Kubeconfig, "-o", "json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Errorf("want a non-zero exit (oversubscription risk), got %v; stderr: %s", err, errOut.String())
	}
	var r preflight.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("decoding -o json: %v\n%s", err, out.String())
	}
	checks := map[string]preflight.Check{}
	for _, c := range r.Checks {
		checks[c.Name] = c
	}
	if c := checks["scheduling.k8s.io/v1beta1 (in-tree gang API)"]; !strings.Contains(c.Detail, "not served") {
		t.Errorf("gang API check: want not served on the eks profile, got %+v", c)
	}
	if c := checks["Job spec.scheduling"]; !strings.Contains(c.Detail, "pruned silently") {
		t.Errorf("Job field check: want pruned on the eks profile, got %+v", c)
	}
	for _, name := range []string{"Lockstep CRDs", "Lockstep webhooks", "Lockstep scheduler", "Lockstep controllers"} {
		if checks[name].Status != preflight.OK {
			t.Errorf("%s: want ok, got %+v", name, checks[name])
		}
	}
	if diff := cmp.Diff([]preflight.Driver{{Name: "gpu.example.com", Nodes: 4, Devices: 8}}, r.Drivers); diff != "" {
		t.Errorf("drivers (-want,+got):\n%s", diff)
	}
	var flagged []string
	for _, o := range r.Overlaps {
		flagged = append(flagged, o.Node+" "+o.Driver+" "+o.ExtendedResource)
	}
	if diff := cmp.Diff([]string{"ng-0 gpu.example.com example.com/gpu", "ng-1 gpu.example.com example.com/gpu"}, flagged); diff != "" {
		t.Errorf("oversubscription risks (-want,+got):\n%s", diff)
	}
	got := map[string]string{}
	for _, p := range r.Pools {
		got[p.SupplyModel+"/"+p.Name] = p.Recommendation
	}
	want := map[string]string{
		"EKS managed node group/gpu-ng":             "DRA driver",
		"Karpenter (dynamic capacity)/spot-gpus":    "device plugin",
		"Karpenter (static capacity)/reserved-gpus": "DRA driver",
		"EKS Auto Mode/general-purpose":             "device plugin",
		"self-managed/(unlabelled)":                 "DRA driver",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node pool recommendations (-want,+got):\n%s", diff)
	}
}
