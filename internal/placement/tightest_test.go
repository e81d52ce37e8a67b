package placement

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// TestTightestIsTheFullSort checks that the lazily produced order is the
// order a full sort gives (nodes with room tightest first, the hopeless
// after them in the order given), however it is read: a short prefix,
// past the lazy prefix, all of it, out of order.
func TestTightestIsTheFullSort(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var nodes []*snapshot.NodeInfo
	for i := range 300 {
		// Few distinct values, so most comparisons tie down to the name.
		nodes = append(nodes, &snapshot.NodeInfo{
			Node:        &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%03d", rng.Intn(1000)*1000+i)}},
			Allocatable: snapshot.Resources{MilliCPU: 8000, Memory: 64 << 30},
			Requested:   snapshot.Resources{MilliCPU: int64(rng.Intn(4)) * 1000, Memory: int64(rng.Intn(3)) << 30},
		})
	}
	hopeless := func(ni *snapshot.NodeInfo) bool { return ni.Requested.MilliCPU == 3000 }
	pref := func(n *corev1.Node) preference { return preference{affinity: int64(len(n.Name) % 2)} }

	var room, none []tightItem
	for _, ni := range nodes {
		it := tightItem{tightKey{cpu: ni.Allocatable.MilliCPU - ni.Requested.MilliCPU, mem: ni.Allocatable.Memory - ni.Requested.Memory, pref: pref(ni.Node)}, ni}
		if hopeless(ni) {
			none = append(none, it)
		} else {
			room = append(room, it)
		}
	}
	slices.SortFunc(room, compareTight)
	var want []string
	for _, it := range append(room, none...) {
		want = append(want, it.ni.Node.Name)
	}
	if len(none) == 0 || len(room) <= lazyPrefix {
		t.Fatalf("the nodes do not exercise the order: %d with room, %d hopeless", len(room), len(none))
	}

	reads := map[string][]int{
		"all in order":            seq(0, len(nodes)),
		"a short prefix":          seq(0, 5),
		"to the lazy prefix":      seq(0, lazyPrefix),
		"one past the prefix":     seq(0, lazyPrefix+1),
		"deep first, then prefix": append([]int{len(room) - 1}, seq(0, 10)...),
		"a hopeless one first":    {len(nodes) - 1, 0, 1, len(room)},
		"at random":               rng.Perm(len(nodes)),
	}
	for name, idx := range reads {
		t.Run(name, func(t *testing.T) {
			o := newTightest(nodes, false, pref, hopeless)
			for _, i := range idx {
				if got := o.at(i).Node.Name; got != want[i] {
					t.Fatalf("at(%d) = %s, want %s", i, got, want[i])
				}
			}
			// Whatever was read before, the whole order is the full sort's.
			for i := range want {
				if got := o.at(i).Node.Name; got != want[i] {
					t.Fatalf("after the reads, at(%d) = %s, want %s", i, got, want[i])
				}
			}
		})
	}
}

// TestTightestFewNodesSortedAtOnce checks the order of fewer nodes than
// the lazy prefix, with devices counted.
func TestTightestFewNodesSortedAtOnce(t *testing.T) {
	mk := func(name string, cpu int64) *snapshot.NodeInfo {
		return &snapshot.NodeInfo{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
			Allocatable: snapshot.Resources{MilliCPU: 8000}, Requested: snapshot.Resources{MilliCPU: cpu}}
	}
	nodes := []*snapshot.NodeInfo{mk("c", 1000), mk("full", 8000), mk("a", 2000), mk("b", 2000)}
	o := newTightest(nodes, true, nil, func(ni *snapshot.NodeInfo) bool { return ni.Requested.MilliCPU == 8000 })
	var got []string
	for i := range nodes {
		got = append(got, o.at(i).Node.Name)
	}
	if want := []string{"a", "b", "c", "full"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
