package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// A gang whose members each claim a WaitForFirstConsumer volume, served by
// static local PersistentVolumes pinned to nodes: Lockstep chooses the
// nodes where the volumes are, binds the volumes (kube-controller-manager's
// PersistentVolume controller completes the binding), then the pods — all
// or nothing: with too few volumes nothing is bound at all.
func TestGangWithWaitForFirstConsumerVolumes(t *testing.T) {
	h := harness.Get(t)
	tests := map[string]struct {
		volumesOn []string // a local PV on each of these nodes
		members   int
		wantBound int
	}{
		"one volume per member: bound where the volumes are": {volumesOn: []string{"worker-0", "worker-2", "worker-2"}, members: 3, wantBound: 3},
		"too few volumes: the gang waits whole":              {volumesOn: []string{"worker-1", "worker-2"}, members: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := h.Namespace(t)
			ctx := harness.Context(t, 2*time.Minute)
			class := "local-" + ns
			sc := &storagev1.StorageClass{
				ObjectMeta:        metav1.ObjectMeta{Name: class},
				Provisioner:       "kubernetes.io/no-provisioner",
				VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			}
			if _, err := h.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = h.Client.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
			})
			pvNode := map[string]string{}
			for i, node := range tc.volumesOn {
				pv := localPV(fmt.Sprintf("%s-pv-%d", ns, i), class, node)
				if _, err := h.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				pvNode[pv.Name] = node
				t.Cleanup(func() {
					_ = h.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
				})
			}
			h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, "data", int32(tc.members)))
			for i := 0; i < tc.members; i++ {
				claim := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("data-%d", i)},
					Spec: corev1.PersistentVolumeClaimSpec{
						StorageClassName: ptr.To(class),
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}
				if _, err := h.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("data-%d", i)).Member("data").Req(corev1.ResourceCPU, "100m").Obj()
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}}
				if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.wantBound == 0 {
				waitCondition(t, ctx, h, ns, "data", metav1.ConditionFalse, lockv1.PodGroupReasonUnschedulable)
				time.Sleep(2 * time.Second)
				if _, bound, err := h.GroupPods(ctx, ns, "data"); err != nil || bound != 0 {
					t.Fatalf("want 0 bound, got %d (%v)", bound, err)
				}
				claims, err := h.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claims.Items {
					if c.Spec.VolumeName != "" {
						t.Errorf("claim %s bound to %s although its gang cannot be placed", c.Name, c.Spec.VolumeName)
					}
				}
				return
			}
			waitBound(t, ctx, h, ns, "data", tc.wantBound)
			pods, _, err := h.GroupPods(ctx, ns, "data")
			if err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, ctx, "every claim Bound to a volume on its pod's node", func(ctx context.Context) (bool, string, error) {
				for _, p := range pods {
					c, err := h.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
					if err != nil {
						return false, "", err
					}
					if c.Status.Phase != corev1.ClaimBound {
						return false, fmt.Sprintf("claim %s is %s", c.Name, c.Status.Phase), nil
					}
					if got := pvNode[c.Spec.VolumeName]; got != p.Spec.NodeName {
						return false, "", fmt.Errorf("pod %s on %s, its volume %s on %s", p.Name, p.Spec.NodeName, c.Spec.VolumeName, got)
					}
				}
				return true, "", nil
			})
		})
	}
}

func localPV(name, class, node string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}
