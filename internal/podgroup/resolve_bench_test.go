package podgroup

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// BenchmarkResolveArriving resolves a gang of minCount 10,000 while its
// members arrive (half of them exist, in the pod index's random order):
// the scheduler does so at each member's creation.
func BenchmarkResolveArriving(b *testing.B) {
	const n = 10000
	pg := &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "huge"}, Spec: lockv1.PodGroupSpec{SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: n}}}}
	var pods []*corev1.Pod
	for i := range n / 2 {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("huge-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
				Labels: map[string]string{lockv1.PodGroupLabel: "huge", "app": "x"}},
			Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName},
		})
	}
	rand.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	assumed := map[types.UID]string{"other": "node-1"}
	b.ReportAllocs()
	for b.Loop() {
		u := Resolve(pg, "ns", "huge", pods, func(p *corev1.Pod) (string, bool) {
			node, ok := assumed[p.UID]
			return node, ok
		})
		if u.Waiting == "" {
			b.Fatal("want the gang waiting for members")
		}
	}
}
