package snapshot

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/features"
)

// benchInput is 5,000 nodes × 8 GPUs where node i has i mod 8 of its GPUs
// taken by a running pod each (17,500 pods and allocated claims).
func benchInput() Input {
	in := Input{Features: features.Default()}
	for i := 0; i < 5000; i++ {
		name := fmt.Sprintf("node-%04d", i)
		in.Nodes = append(in.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("110"),
		}}})
		sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"}, Spec: resourcev1.ResourceSliceSpec{Driver: "d", Pool: resourcev1.ResourcePool{Name: name}, NodeName: ptr.To(name)}}
		for d := 0; d < 8; d++ {
			sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
		}
		in.Slices = append(in.Slices, sl)
		for d := 0; d < i%8; d++ {
			pn := fmt.Sprintf("busy-%d-%d", i, d)
			in.Pods = append(in.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: pn, UID: types.UID(pn)}, Spec: corev1.PodSpec{NodeName: name,
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}}})
			in.Claims = append(in.Claims, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: pn}, Status: resourcev1.ResourceClaimStatus{
				Allocation: allocationOf(name, fmt.Sprintf("gpu-%d", d)),
			}})
		}
	}
	return in
}

// BenchmarkCacheUpdate is the scheduler's per-cycle snapshot update at
// 5,000 nodes: with nothing changed since the last cycle, with one node
// changed (its object replaced), with one pod bound and its claim
// allocated, and — for comparison — the snapshot rebuilt from every object.
func BenchmarkCacheUpdate(b *testing.B) {
	in := benchInput()
	b.Run("nodes=5000/nothing-changed", func(b *testing.B) {
		c := CacheFrom(in)
		c.Update()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c.Update()
		}
	})
	b.Run("nodes=5000/one-node-changed", func(b *testing.B) {
		c := CacheFrom(in)
		c.Update()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			n := in.Nodes[i%len(in.Nodes)].DeepCopy()
			c.UpdateNode(n)
			c.Update()
		}
	})
	b.Run("nodes=5000/one-pod-bound", func(b *testing.B) {
		c := CacheFrom(in)
		c.Update()
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "rank"}}
		c.AddClaim(claim)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			node := in.Nodes[0].Name
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "rank", UID: "rank"}, Spec: corev1.PodSpec{NodeName: node}}
			bound := claim.DeepCopy()
			bound.Status.Allocation = allocationOf(node, "gpu-7")
			c.AddPod(p)
			c.UpdateClaim(bound)
			c.Update()
			c.DeletePod(p)
			c.UpdateClaim(claim)
			c.Update()
		}
	})
	b.Run("nodes=5000/rebuilt", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			New(in)
		}
	})
}

// BenchmarkCacheMemory reports the heap the cache and its snapshot add at
// 5,000 nodes × 8 GPUs with 50,000 running pods (10 per node; 40,000 of
// them holding a GPU claim), beyond the objects themselves (which the
// informers hold anyway), and the heap of those objects.
func BenchmarkCacheMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		before := heap()
		in := Input{Features: features.Default()}
		for n := 0; n < 5000; n++ {
			name := fmt.Sprintf("node-%04d", n)
			in.Nodes = append(in.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprint("zone-", n%4)}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourcePods: resource.MustParse("110")}}})
			sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu"}, Spec: resourcev1.ResourceSliceSpec{Driver: "d", Pool: resourcev1.ResourcePool{Name: name}, NodeName: ptr.To(name)}}
			for d := 0; d < 8; d++ {
				sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
			}
			in.Slices = append(in.Slices, sl)
			for p := 0; p < 10; p++ {
				pn := fmt.Sprintf("train-%d-%d", n, p)
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: pn, UID: types.UID(pn), Labels: map[string]string{"app": "train"}}, Spec: corev1.PodSpec{NodeName: name,
					Containers: []corev1.Container{{Name: "c", Image: "example.com/train:v1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}}}}}}
				in.Pods = append(in.Pods, pod)
				if p < 8 {
					in.Claims = append(in.Claims, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: pn + "-gpu"}, Status: resourcev1.ResourceClaimStatus{
						Allocation:  allocationOf(name, fmt.Sprintf("gpu-%d", p)),
						ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pn, UID: pod.UID}},
					}})
				}
			}
		}
		objects := heap() - before
		c := CacheFrom(in)
		c.Update()
		cache := heap() - before - objects
		b.ReportMetric(float64(objects)/(1<<20), "objects-MiB")
		b.ReportMetric(float64(cache)/(1<<20), "cache+snapshot-MiB")
		runtime.KeepAlive(c)
		runtime.KeepAlive(in)
	}
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
