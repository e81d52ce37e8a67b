package dra

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const extendedGPU = corev1.ResourceName("example.com/gpu")

// gpuExtendedClass makes GPUs of gpu.example.com serve example.com/gpu.
func gpuExtendedClass(t *testing.T, ctx context.Context, h *harness.Harness) {
	t.Helper()
	h.CreateDeviceClass(ctx, t, builders.ExtendedResourceClass("gpu-extended", "gpu.example.com", string(extendedGPU)))
}

// extendedClaimOf returns the claim a pod's extendedResourceClaimStatus
// names, checked to be the one created for that pod.
func extendedClaimOf(ctx context.Context, h *harness.Harness, p *corev1.Pod) (*resourcev1.ResourceClaim, error) {
	st := p.Status.ExtendedResourceClaimStatus
	if st == nil {
		return nil, fmt.Errorf("pod %s has no extendedResourceClaimStatus", p.Name)
	}
	c, err := h.Client.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	owned := false
	for _, o := range c.OwnerReferences {
		owned = owned || o.UID == p.UID && ptr.Deref(o.Controller, false)
	}
	if c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" || !owned {
		return nil, fmt.Errorf("claim %s of pod %s: annotations %v, owners %v", c.Name, p.Name, c.Annotations, c.OwnerReferences)
	}
	return c, nil
}

// A gang asking for example.com/gpu is served by the device plugin where a
// node advertises it and by the DeviceClass elsewhere: each DRA-served rank
// gets its own claim, allocated on its node and reserved for it.
func TestExtendedResourceBackedByDRA(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	gpuExtendedClass(t, ctx, h)
	h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "ranks", 6))
	for i := 0; i < 6; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("rank-%d", i)).Member("ranks").Req(corev1.ResourceCPU, "1").Req(extendedGPU, "1").Obj()
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "6 ranks bound: 2 on the device-plugin node, 4 with DRA claims", func(ctx context.Context) (bool, string, error) {
		pods, bound, err := h.GroupPods(ctx, ns, "ranks")
		if err != nil || bound < 6 {
			return false, fmt.Sprintf("%d bound", bound), err
		}
		devices := map[string]string{}
		plugin := 0
		for i := range pods {
			p := &pods[i]
			if p.Spec.NodeName == "plugin-0" {
				if p.Status.ExtendedResourceClaimStatus != nil {
					return false, "", fmt.Errorf("pod %s on the device-plugin node has a claim %s", p.Name, p.Status.ExtendedResourceClaimStatus.ResourceClaimName)
				}
				plugin++
				continue
			}
			c, err := extendedClaimOf(ctx, h, p)
			if err != nil {
				return false, err.Error(), nil
			}
			if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 || len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].UID != p.UID {
				return false, fmt.Sprintf("claim %s not yet allocated and reserved for %s", c.Name, p.Name), nil
			}
			r := c.Status.Allocation.Devices.Results[0]
			if r.Pool != p.Spec.NodeName {
				return false, "", fmt.Errorf("pod %s on %s got device %s of pool %s", p.Name, p.Spec.NodeName, r.Device, r.Pool)
			}
			if other, dup := devices[r.Pool+"/"+r.Device]; dup {
				return false, "", fmt.Errorf("device %s/%s given to %s and %s", r.Pool, r.Device, other, p.Name)
			}
			devices[r.Pool+"/"+r.Device] = p.Name
		}
		if plugin != 2 {
			return false, "", fmt.Errorf("%d ranks on the device-plugin node, want its 2 GPUs used first (tightest)", plugin)
		}
		return true, "", nil
	})

	// More than any node has: refused with the device message, and no
	// claim is created for it.
	big := builders.MakePod().Namespace(ns).Name("eight").Scheduler("lockstep").Req(corev1.ResourceCPU, "1").Req(extendedGPU, "8").Obj()
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the 8-GPU pod is Unschedulable for devices", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "eight", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return c.Reason == corev1.PodReasonUnschedulable, c.Message, nil
			}
		}
		return false, "no PodScheduled condition", nil
	})
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 4 {
		t.Errorf("%d claims in the namespace, want the 4 of the ranks", len(claims.Items))
	}
}

// The claim and mappings Lockstep creates for a pod are the ones
// kube-scheduler creates for the same pod: requests (names, classes,
// counts) and container mappings, over init, sidecar and regular
// containers.
func TestExtendedResourceClaimsMatchKubeScheduler(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	gpuExtendedClass(t, ctx, h)
	ctr := func(name, gpus string, sidecar bool) corev1.Container {
		q := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), extendedGPU: resource.MustParse(gpus)}
		c := corev1.Container{Name: name, Image: "sim", Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}
		if sidecar {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		return c
	}
	shapes := []struct {
		name       string
		init, main []corev1.Container
	}{
		{name: "main", main: []corev1.Container{ctr("c", "2", false)}},
		{name: "two", main: []corev1.Container{ctr("a", "1", false), ctr("b", "2", false)}},
		{name: "init-reuses", init: []corev1.Container{ctr("i", "1", false)}, main: []corev1.Container{ctr("c", "2", false)}},
		{name: "init-needs-more", init: []corev1.Container{ctr("i", "3", false)}, main: []corev1.Container{ctr("c", "1", false)}},
		{name: "sidecar", init: []corev1.Container{ctr("s", "1", true), ctr("i", "1", false)}, main: []corev1.Container{ctr("c", "1", false)}},
	}
	type shapeResult struct {
		Requests []resourcev1.DeviceRequest
		Mappings []corev1.ContainerExtendedResourceRequest
	}
	run := func(scheduler, name string, init, main []corev1.Container) shapeResult {
		t.Helper()
		p := builders.MakePod().Namespace(ns).Name(name).Scheduler(scheduler).Obj()
		p.Spec.InitContainers, p.Spec.Containers = init, main
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "node-1"}
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var out shapeResult
		harness.Eventually(t, ctx, name+" bound by "+scheduler+" with its claim", func(ctx context.Context) (bool, string, error) {
			cur, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || cur.Spec.NodeName == "" {
				return false, "not bound", err
			}
			c, err := extendedClaimOf(ctx, h, cur)
			if err != nil {
				return false, err.Error(), nil
			}
			out = shapeResult{Requests: c.Spec.Devices.Requests, Mappings: cur.Status.ExtendedResourceClaimStatus.RequestMappings}
			return true, "", nil
		})
		if err := h.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, ctx, name+"'s claim deleted with it", func(ctx context.Context) (bool, string, error) {
			claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			return len(claims.Items) == 0, fmt.Sprintf("%d claims left", len(claims.Items)), nil
		})
		return out
	}
	for _, s := range shapes {
		kube := run("default-scheduler", "kube-"+s.name, s.init, s.main)
		lockstep := run("lockstep", "lockstep-"+s.name, s.init, s.main)
		if diff := cmp.Diff(kube, lockstep); diff != "" {
			t.Errorf("%s: Lockstep's claim differs from kube-scheduler's (-kube +lockstep):\n%s", s.name, diff)
		}
	}
}
