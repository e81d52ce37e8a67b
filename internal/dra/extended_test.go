package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestNewExtendedClaim(t *testing.T) {
	const gpu = corev1.ResourceName("example.com/gpu")
	ctr := func(name, gpus string, sidecar bool) corev1.Container {
		c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse(gpus)}}}
		if sidecar {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		return c
	}
	type req struct {
		name  string
		count int64
	}
	type mapping struct{ container, request string }
	tests := []struct {
		name         string
		init, main   []corev1.Container
		wantRequests []req
		wantMappings []mapping
	}{
		{
			name:         "one container",
			main:         []corev1.Container{ctr("c", "2", false)},
			wantRequests: []req{{"container-0-request-1", 2}},
			wantMappings: []mapping{{"c", "container-0-request-1"}},
		},
		{
			name:         "an init container reuses the devices of the container after it",
			init:         []corev1.Container{ctr("i", "1", false)},
			main:         []corev1.Container{ctr("c", "2", false)},
			wantRequests: []req{{"container-1-request-1", 2}},
			wantMappings: []mapping{{"c", "container-1-request-1"}, {"i", "container-1-request-1"}},
		},
		{
			name:         "an init container that needs more asks for the rest",
			init:         []corev1.Container{ctr("i", "3", false)},
			main:         []corev1.Container{ctr("c", "1", false)},
			wantRequests: []req{{"container-0-request-1", 2}, {"container-1-request-1", 1}},
			wantMappings: []mapping{{"c", "container-1-request-1"}, {"i", "container-1-request-1"}, {"i", "container-0-request-1"}},
		},
		{
			name:         "a sidecar started before an init container is not reused by it",
			init:         []corev1.Container{ctr("s", "1", true), ctr("i", "1", false)},
			main:         []corev1.Container{ctr("c", "1", false)},
			wantRequests: []req{{"container-0-request-1", 1}, {"container-2-request-1", 1}},
			wantMappings: []mapping{{"s", "container-0-request-1"}, {"c", "container-2-request-1"}, {"i", "container-2-request-1"}},
		},
		{
			name:         "init containers share the largest request",
			init:         []corev1.Container{ctr("i0", "3", false), ctr("i1", "2", false)},
			main:         []corev1.Container{{Name: "c"}},
			wantRequests: []req{{"container-0-request-1", 3}},
			wantMappings: []mapping{{"i0", "container-0-request-1"}, {"i1", "container-0-request-1"}},
		},
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid"}, Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.main}}
			ext := NewExtendedClaim(pod, []corev1.ResourceName{gpu}, func(corev1.ResourceName) *resourcev1.DeviceClass { return class })
			var gotReqs []req
			for _, r := range ext.Claim.Spec.Devices.Requests {
				if r.Exactly.DeviceClassName != "gpu" || r.Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount {
					t.Errorf("request %s: class %q, mode %q", r.Name, r.Exactly.DeviceClassName, r.Exactly.AllocationMode)
				}
				gotReqs = append(gotReqs, req{r.Name, r.Exactly.Count})
			}
			var gotMaps []mapping
			for _, m := range ext.Mappings {
				if m.ResourceName != string(gpu) {
					t.Errorf("mapping %v names another resource", m)
				}
				gotMaps = append(gotMaps, mapping{m.ContainerName, m.RequestName})
			}
			if diff := cmp.Diff(tc.wantRequests, gotReqs, cmp.AllowUnexported(req{})); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMappings, gotMaps, cmp.AllowUnexported(mapping{})); diff != "" {
				t.Errorf("mappings (-want +got):\n%s", diff)
			}
			if ExtendedClaimOwner(ext.Claim) != "uid" {
				t.Errorf("owner %q, want the pod", ExtendedClaimOwner(ext.Claim))
			}
		})
	}
	if NewExtendedClaim(&corev1.Pod{}, []corev1.ResourceName{gpu}, func(corev1.ResourceName) *resourcev1.DeviceClass { return nil }) != nil {
		t.Error("a claim for a resource no class serves")
	}
}
