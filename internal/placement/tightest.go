package placement

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// tightest is a group's feasible nodes in the order its members try them:
// fewest free devices first (when the pods use devices), then least free
// CPU, then least free memory; among nodes equally tight, the pod's
// preferences break the tie; then the name. The nodes that cannot hold one
// member as the attempt starts come last, in the snapshot's order: they
// cannot during the attempt either (capacity only shrinks), and are still
// tried, and counted, when a member finds no room elsewhere. First, where
// the fullest nodes sort, every member would try them again.
//
// The order is produced as it is read. A member usually takes one of the
// first nodes it tries, so most placements read a short prefix of
// thousands of feasible nodes: the rest wait in a heap, and are sorted at
// once only when a reader walks deep (a unit that does not fit). The
// order is the same as a full sort's: the comparison is total.
type tightest struct {
	// sorted is the prefix of the order produced so far; heap the rest of
	// the nodes with room; hopeless the nodes without.
	sorted   []*snapshot.NodeInfo
	heap     []tightItem
	hopeless []*snapshot.NodeInfo
}

type tightKey struct {
	dev, cpu, mem int64
	pref          preference
}

// tightItem is a node beside its key, computed once (a comparison reads
// no map).
type tightItem struct {
	tightKey
	ni *snapshot.NodeInfo
}

// lazyPrefix is how many nodes are produced one by one from the heap
// before the rest is sorted at once.
const lazyPrefix = 32

func compareTight(a, b tightItem) int {
	switch {
	case a.dev != b.dev:
		return cmp.Compare(a.dev, b.dev)
	case a.cpu != b.cpu:
		return cmp.Compare(a.cpu, b.cpu)
	case a.mem != b.mem:
		return cmp.Compare(a.mem, b.mem)
	case a.pref != b.pref:
		if a.pref.better(b.pref) {
			return -1
		}
		return 1
	}
	return strings.Compare(a.ni.Node.Name, b.ni.Node.Name)
}

// newTightest orders nodes for pods that use devices or not, with the
// pod's preferences (pref, may be nil); hopeless reports a node without
// room for one member.
func newTightest(nodes []*snapshot.NodeInfo, devices bool, pref func(*corev1.Node) preference, hopeless func(*snapshot.NodeInfo) bool) tightest {
	var t tightest
	for _, ni := range nodes {
		if hopeless(ni) {
			t.hopeless = append(t.hopeless, ni)
			continue
		}
		k := tightKey{cpu: ni.Allocatable.MilliCPU - ni.Requested.MilliCPU, mem: ni.Allocatable.Memory - ni.Requested.Memory}
		if devices {
			k.dev = int64(ni.FreeDevices())
		}
		if pref != nil {
			k.pref = pref(ni.Node)
		}
		t.heap = append(t.heap, tightItem{k, ni})
	}
	if len(t.heap) <= lazyPrefix {
		t.sortRest()
		return t
	}
	for i := len(t.heap)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
	return t
}

// room counts the nodes with room: those produced and those waiting.
func (t *tightest) room() int { return len(t.sorted) + len(t.heap) }

// at is the i-th node of the order.
func (t *tightest) at(i int) *snapshot.NodeInfo {
	if room := t.room(); i >= room {
		return t.hopeless[i-room]
	}
	for len(t.sorted) <= i {
		if len(t.sorted) >= lazyPrefix {
			t.sortRest()
			break
		}
		t.sorted = append(t.sorted, t.pop().ni)
	}
	return t.sorted[i]
}

// sortRest appends the rest of the nodes with room at once.
func (t *tightest) sortRest() {
	slices.SortFunc(t.heap, compareTight)
	if t.sorted == nil {
		t.sorted = make([]*snapshot.NodeInfo, 0, len(t.heap))
	}
	for _, it := range t.heap {
		t.sorted = append(t.sorted, it.ni)
	}
	t.heap = nil
}

func (t *tightest) pop() tightItem {
	top := t.heap[0]
	last := len(t.heap) - 1
	t.heap[0] = t.heap[last]
	t.heap = t.heap[:last]
	t.down(0)
	return top
}

// down restores the heap below i.
func (t *tightest) down(i int) {
	h := t.heap
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && compareTight(h[l], h[least]) < 0 {
			least = l
		}
		if r < len(h) && compareTight(h[r], h[least]) < 0 {
			least = r
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
