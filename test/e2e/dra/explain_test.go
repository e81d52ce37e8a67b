package dra

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Seed 003 steps 2 and 3, on the API server: node-1's GPU driver stops
// publishing (its ResourceSlices deleted, as when its kubelet plugin
// DaemonSet is not ready after an upgrade) and plugin-0's device plugin
// registers no device (capacity 2, allocatable 0). explain names node-1 and
// the driver for a pod that must run there, and plugin-0 for a pod asking
// the device plugin's resource. Both are put back afterwards.
func TestExplainNamesTheBrokenDriver(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)

	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gone []resourcev1.ResourceSlice
	for _, s := range slices.Items {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == "node-1" && s.Spec.Driver == "gpu.example.com" {
			gone = append(gone, s)
			if err := h.Client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, s := range gone {
			s.ResourceVersion, s.UID = "", ""
			if _, err := h.Client.ResourceV1().ResourceSlices().Create(context.Background(), &s, metav1.CreateOptions{}); err != nil {
				t.Errorf("putting slice %s back: %v", s.Name, err)
			}
		}
	})
	if len(gone) == 0 {
		t.Fatal("node-1 publishes no gpu.example.com slice to take away")
	}
	setAllocatable(t, ctx, h, "plugin-0", "0")
	t.Cleanup(func() { setAllocatable(t, context.Background(), h, "plugin-0", "2") })

	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onNode1 := builders.MakePod().Namespace(ns).Name("on-node-1").Scheduler("lockstep").ClaimTemplate("gpu", "one-gpu").Obj()
	onNode1.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}}}},
	}}}
	plugin := builders.MakePod().Namespace(ns).Name("plugin-gpu").Scheduler("lockstep").Req("example.com/gpu", "1").Obj()
	plugin.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "plugin-0"}
	for _, p := range []*corev1.Pod{onNode1, plugin} {
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var r *explain.Report
	harness.Eventually(t, ctx, "explain names node-1 and its missing driver", func(ctx context.Context) (bool, string, error) {
		r = h.Explain(t, ns, "pod", "on-node-1")
		for _, d := range r.Devices {
			if d.Class == "gpu.example.com" {
				return cmp.Equal(d.NoSlices, []string{"node-1"}) && cmp.Equal(d.Drivers, []string{"gpu.example.com"}), fmt.Sprintf("%+v", d), nil
			}
		}
		return false, fmt.Sprintf("no class report: %+v", r.Devices), nil
	})
	harness.Eventually(t, ctx, "explain names plugin-0's capacity without allocatable", func(ctx context.Context) (bool, string, error) {
		r = h.Explain(t, ns, "pod", "plugin-gpu")
		for _, er := range r.ExtendedResources {
			if er.Name == "example.com/gpu" {
				return cmp.Equal(er.NotAllocatable, []string{"plugin-0: capacity 2, allocatable 0"}), strings.Join(er.NotAllocatable, "; "), nil
			}
		}
		return false, fmt.Sprintf("no extended resource: %+v", r.ExtendedResources), nil
	})
}

// setAllocatable sets a node's allocatable example.com/gpu, as its kubelet
// does from what the device plugin registers.
func setAllocatable(t *testing.T, ctx context.Context, h *harness.Harness, node, n string) {
	t.Helper()
	no, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	no.Status.Allocatable["example.com/gpu"] = resource.MustParse(n)
	if _, err := h.Client.CoreV1().Nodes().UpdateStatus(ctx, no, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
