package dra

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const numaNode = resourcev1.FullyQualifiedName("resource.kubernetes.io/numaNode")

// NUMA alignment where a driver publishes the NUMA node rather than a PCIe
// root: the nodes of examples/clusters/gpu-nic-numa.yaml join the cluster
// (their GPUs and NICs carry only resource.kubernetes.io/numaNode), and
// examples/numa/numa-aligned-job.yaml — a 4-rank gang Job, each rank 2 GPUs
// and a NIC with matchAttribute numaNode — is applied as a user would. Every
// rank binds on those nodes with its GPUs and NIC on one NUMA node. The
// nodes go again afterwards.
func TestNUMAAlignedExample(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	addCluster(t, ctx, h, filepath.Join(h.RepoRoot, "examples", "clusters", "gpu-nic-numa.yaml"))
	path := filepath.Join(h.RepoRoot, "examples", "numa", "numa-aligned-job.yaml")
	if out, err := exec.CommandContext(ctx, filepath.Join(h.BinDir, "kubectl"), "--kubeconfig", h.Kubeconfig, "apply", "-n", ns, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", path, err, out)
	}
	h.WaitRunning(t, ctx, ns, "numa", 4)
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 4 {
		t.Fatalf("%d claims, want one per rank", len(claims.Items))
	}
	slices, err := h.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			t.Fatalf("claim %s not allocated", c.Name)
		}
		numa := map[string]bool{}
		for _, r := range c.Status.Allocation.Devices.Results {
			numa[attribute(slices.Items, r, numaNode)] = true
		}
		if len(numa) != 1 || numa[""] {
			t.Errorf("claim %s: devices on NUMA nodes %v, want one (%+v)", c.Name, numa, c.Status.Allocation.Devices.Results)
		}
	}
}

// attribute is a device's value of attr ("" if it has none), read from the
// slices.
func attribute(slices []resourcev1.ResourceSlice, r resourcev1.DeviceRequestAllocationResult, attr resourcev1.FullyQualifiedName) string {
	for _, s := range slices {
		if s.Spec.Driver != r.Driver || s.Spec.Pool.Name != r.Pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name != r.Device {
				continue
			}
			for name, a := range d.Attributes {
				if string(name) == string(attr) && a.IntValue != nil {
					return fmt.Sprint(*a.IntValue)
				}
			}
		}
	}
	return ""
}

// addCluster adds a cluster spec's nodes (simulated, as `lockstep dev up`
// makes them) and their ResourceSlices to the running cluster, and deletes
// them when the test ends; its DeviceClasses must exist already.
func addCluster(t *testing.T, ctx context.Context, h *harness.Harness, path string) {
	t.Helper()
	spec, err := clusterspec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := clusterspec.Render(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range objs.Nodes {
		if _, err := h.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// kwok writes the node's status too (its conditions): retry on a
		// conflict with the latest version.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			latest, err := h.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			latest.Status.Capacity, latest.Status.Allocatable = n.Status.Capacity, n.Status.Allocatable
			_, err = h.Client.CoreV1().Nodes().UpdateStatus(ctx, latest, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range objs.ResourceSlices {
		if _, err := h.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range objs.ResourceSlices {
			if err := h.Client.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting slice %s: %v", s.Name, err)
			}
		}
		for _, n := range objs.Nodes {
			if err := h.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting node %s: %v", n.Name, err)
			}
		}
	})
}
