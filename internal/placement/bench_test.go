package placement

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/kubefilter"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

const benchNodes = 5000

// benchCluster is 5,000 nodes × 8 DRA GPUs. fragmented: node i already has
// i mod 8 of its GPUs allocated (and matching CPU used), so free GPUs are
// scattered in runs of 1 to 8.
func benchCluster(b *testing.B, fragmented bool) snapshot.Input {
	spec := fmt.Sprintf(`
nodePools:
- name: gpu
  count: %d
  capacity: {cpu: "96", memory: 1Ti, pods: "110"}
  labels: {topology.kubernetes.io/zone: "zone-{{mod .Index 4}}"}
  devices:
  - driver: gpu.example.com
    count: 8
    attributes:
      index: {int: "{{.Index}}"}
`, benchNodes)
	c, err := clusterspec.Parse([]byte(spec))
	if err != nil {
		b.Fatal(err)
	}
	objs, err := clusterspec.Render(c)
	if err != nil {
		b.Fatal(err)
	}
	in := snapshot.Input{Features: features.Default(), Nodes: objs.Nodes, Slices: objs.ResourceSlices, Classes: objs.DeviceClasses}
	if !fragmented {
		return in
	}
	builders.Fragment(&in)
	return in
}

// benchGang is n identical pods, each with its own claim for one GPU (the
// shape an Indexed Job with a ResourceClaimTemplate produces).
func benchGang(in *snapshot.Input, n int) []Member {
	ms := make([]Member, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("rank-%d", i)
		pod := builders.MakePod().Namespace("ml").Name(name).Req(corev1.ResourceCPU, "4").ClaimTemplate("gpu", "one-gpu").Obj()
		pod.UID = types.UID(name)
		claim := builders.Claim("ml", name+"-gpu", "gpu.example.com", 1)
		claim.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: name, UID: pod.UID}}
		in.Claims = append(in.Claims, claim)
		ms = append(ms, Member{Pod: pod, Claims: []types.NamespacedName{{Namespace: "ml", Name: claim.Name}}})
	}
	return ms
}

// BenchmarkGangCycle measures one scheduling cycle: getting the snapshot
// and placing one gang all or nothing. snapshot=rebuilt builds it from the
// cluster's objects (snapshot.New, what every cycle did before the cache);
// snapshot=cached brings the scheduler's cache's snapshot up to date, where
// all that changed since the last cycle is the last cycle's own placement.
func BenchmarkGangCycle(b *testing.B) {
	for _, frag := range []bool{false, true} {
		base := benchCluster(b, frag)
		for _, size := range []int{8, 256, 1024} {
			for _, mode := range []string{"rebuilt", "cached"} {
				name := fmt.Sprintf("nodes=%d/gpus=8/fragmented=%v/gang=%d/snapshot=%s", benchNodes, frag, size, mode)
				b.Run(name, func(b *testing.B) { benchGangCycle(b, base, size, mode == "cached") })
			}
		}
	}
}

func benchGangCycle(b *testing.B, base snapshot.Input, size int, cached bool) {
	in := base
	in.Claims = append([]*resourcev1.ResourceClaim(nil), base.Claims...)
	members := benchGang(&in, size)
	cache := dra.NewCache()
	ctx := klog.NewContext(context.Background(), klog.Background().V(0))
	next := func() *snapshot.Snapshot { return snapshot.New(in) }
	if cached {
		next = snapshot.CacheFrom(in).Update
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap := next()
		res, err := Place(ctx, snap, dra.New(snap, cache), Unit{Members: members, MinCount: size, Gang: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Assignments) != size {
			b.Fatalf("placed %d of %d", len(res.Assignments), size)
		}
	}
}

// BenchmarkGangCycleWithPodConstraints is the same cycle with kube-scheduler's
// pod-dependent filters (internal/kubefilter) attached: "none" costs only
// the view over the cluster's pods; "anti-affinity" gives every member
// required anti-affinity on the hostname, so each member runs
// kube-scheduler's PreFilter and Filter against the members before it.
func BenchmarkGangCycleWithPodConstraints(b *testing.B) {
	ctx := klog.NewContext(context.Background(), klog.Background().V(0))
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	filters, err := kubefilter.New(ctx, factory, client)
	if err != nil {
		b.Fatal(err)
	}
	base := benchCluster(b, true)
	for _, mode := range []string{"none", "anti-affinity"} {
		for _, size := range []int{8, 256} {
			b.Run(fmt.Sprintf("nodes=%d/fragmented=true/gang=%d/constraints=%s", benchNodes, size, mode), func(b *testing.B) {
				in := base
				in.Claims = append([]*resourcev1.ResourceClaim(nil), base.Claims...)
				members := benchGang(&in, size)
				if mode == "anti-affinity" {
					for _, m := range members {
						m.Pod.Labels = map[string]string{"job": "train"}
						m.Pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "train"}}, TopologyKey: corev1.LabelHostname,
						}}}}
					}
				}
				cache := dra.NewCache()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					snap := snapshot.New(in)
					snap.Constraints = filters.NewView(in.Nodes, in.Pods)
					res, err := Place(ctx, snap, dra.New(snap, cache), Unit{Members: members, MinCount: size, Gang: true})
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Assignments) != size {
						b.Fatalf("placed %d of %d", len(res.Assignments), size)
					}
				}
			})
		}
	}
}
