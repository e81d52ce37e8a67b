package controlplane

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestNodesAreReadyWithSpecCapacity(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 30*time.Second)
	nodes, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
		if !devcluster.NodeSchedulable(&n) {
			t.Errorf("node %s: not Ready or still tainted: %v", n.Name, n.Spec.Taints)
		}
		if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("8")) != 0 {
			t.Errorf("node %s: allocatable cpu want 8, got %s", n.Name, got.String())
		}
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"worker-0", "worker-1", "worker-2"}, names); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
}

func TestResourceSlicesPublishSixGPUs(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 30*time.Second)
	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var devices []string
	for _, s := range slices.Items {
		if s.Spec.Driver != "gpu.example.com" {
			t.Errorf("slice %s: driver %q, want gpu.example.com", s.Name, s.Spec.Driver)
		}
		for _, d := range s.Spec.Devices {
			devices = append(devices, fmt.Sprintf("%s/%s", s.Spec.Pool.Name, d.Name))
		}
	}
	sort.Strings(devices)
	want := []string{"worker-0/gpu-0", "worker-0/gpu-1", "worker-1/gpu-0", "worker-1/gpu-1", "worker-2/gpu-0", "worker-2/gpu-1"}
	if diff := cmp.Diff(want, devices); diff != "" {
		t.Errorf("devices (-want,+got):\n%s", diff)
	}
	if _, err := h.Client.ResourceV1().DeviceClasses().Get(ctx, "gpu.example.com", metav1.GetOptions{}); err != nil {
		t.Errorf("DeviceClass gpu.example.com: %v", err)
	}
}

func TestGangAPINotServedInEKSProfile(t *testing.T) {
	h := harness.Get(t)
	served, err := harness.ServesGroupVersion(h.Client, "scheduling.k8s.io/v1beta1", "podgroups")
	if err != nil {
		t.Fatal(err)
	}
	if served {
		t.Fatal("eks profile must not serve scheduling.k8s.io/v1beta1 podgroups (no gate can be set on a managed control plane)")
	}
	ns := h.Namespace(t)
	ctx := harness.Context(t, 30*time.Second)
	_, err = h.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, gangPodGroup(ns, "pg", 4), metav1.CreateOptions{})
	if err == nil {
		t.Fatal("creating a scheduling.k8s.io/v1beta1 PodGroup succeeded on the eks profile; want NotFound")
	}
}
