package builders

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Each builder makes the object its calls spell out, and nothing else.
func TestBuilders(t *testing.T) {
	for name, tc := range map[string]struct {
		got, want any
	}{
		"node": {
			got: MakeNode().Name("n1").Label("zone", "a").Capacity(corev1.ResourceCPU, "8").Taint("gpu", "", corev1.TaintEffectNoSchedule).Obj(),
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
				Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}},
				Status: corev1.NodeStatus{
					Capacity:    corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("8")},
					Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceCPU: resource.MustParse("8")},
					Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				},
			},
		},
		"claim": {
			got: MakeClaim().Namespace("ns").Name("c").Request("gpu", "gpu.example.com", 2).Allocated("n1", "gpu", "gpu.example.com", "n1", "gpu-0", "gpu-1").ReservedFor("p", "uid-p").Obj(),
			want: &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
					Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2}}}}},
				Status: resourcev1.ResourceClaimStatus{
					Allocation: &resourcev1.AllocationResult{
						NodeSelector: nodeSelectorFor("n1"),
						Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
							{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"},
							{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-1"},
						}},
					},
					ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "uid-p"}},
				},
			},
		},
		"gang PodGroup": {
			got: MakePodGroup().Namespace("ns").Name("g").MinCount(4).DisruptionAll().ControlledBy("batch/v1", "Job", "g", "uid-j").Obj(),
			want: &lockv1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", OwnerReferences: []metav1.OwnerReference{
					{APIVersion: "batch/v1", Kind: "Job", Name: "g", UID: "uid-j", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
				Spec: lockv1.PodGroupSpec{
					SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: 4}},
					DisruptionMode:   &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}},
				},
			},
		},
		"basic PodGroup": {
			got:  MakePodGroup().Namespace("ns").Name("b").Obj(),
			want: &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Spec: lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Basic: &lockv1.BasicSchedulingPolicy{}}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}
