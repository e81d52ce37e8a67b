package dra

import (
	"strconv"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// answers remembers what the allocator answered for claims on a node, so
// that asking again in the same state costs a lookup. One decision asks
// the same questions many times: a preemption search places the unit tens
// of times with a few candidates more or less each time, and the members
// of a gang share their claims' specs.
//
// The structured allocator's answer depends only on what a key holds: the
// node (its slices, its Node object), which of the node's devices are
// allocated, and the specs of the claims asked for, in order — the
// DeviceClasses, the allocator's features and the snapshot's slices do not
// change while an Allocator lives (one decision). Nothing is remembered
// while any device is shared (a share held, capacity consumed: the key
// does not describe them, and the allocator counts a shared device as in
// use — a partition's counters too — even when its slice no longer allows
// several allocations), nor for a node with a device that allows several
// allocations (the allocator names each new share afresh), nor when the
// cluster has slices outside any node (their state is the whole
// cluster's).
type answers struct {
	known map[answerKey][]resourcev1.AllocationResult
	// ids are each slice's device IDs; shared marks a slice with a device
	// that allows several allocations.
	ids map[*resourcev1.ResourceSlice]sliceIDs
	// specs are each snapshot claim's spec, serialized.
	specs map[*resourcev1.ResourceClaim]string
	// buf is reused to build keys.
	buf []byte
}

type answerKey struct {
	node *snapshot.NodeInfo
	// allocated has one bit per device of the node's slices, in order: set
	// when the device is allocated; more holds the bits past the first
	// 128 (a node with that many devices), a byte per 8.
	allocated [2]uint64
	more      string
	// asked is how many claims are asked for; claims their specs: one
	// claim's as it is, several each after its length.
	asked  int
	claims string
}

type sliceIDs struct {
	ids    []structured.DeviceID
	shared bool
}

// answersLimit bounds what one Allocator remembers: past it, it forgets
// everything and starts again.
const answersLimit = 1 << 16

// key is the key of asking for claims on node; false when the answer must
// not be remembered.
func (m *answers) key(snap *snapshot.Snapshot, node *snapshot.NodeInfo, claims []*resourcev1.ResourceClaim) (answerKey, bool) {
	if len(snap.GlobalSlices) > 0 || len(snap.Shared) > 0 || len(snap.Consumed) > 0 {
		return answerKey{}, false
	}
	if m.ids == nil {
		m.ids = map[*resourcev1.ResourceSlice]sliceIDs{}
		m.specs = map[*resourcev1.ResourceClaim]string{}
	}
	var key answerKey
	more := m.buf[:0]
	n := 0
	for _, sl := range node.Slices {
		ids, ok := m.ids[sl]
		if !ok {
			ids = idsOf(sl)
			m.ids[sl] = ids
		}
		if ids.shared {
			return answerKey{}, false
		}
		for _, id := range ids.ids {
			allocated := snap.Allocated.Has(id)
			switch {
			case n < 128:
				if allocated {
					key.allocated[n/64] |= 1 << (n % 64)
				}
			case allocated:
				more = append(more, make([]byte, (n-128)/8+1-len(more))...)
				more[(n-128)/8] |= 1 << ((n - 128) % 8)
			}
			n++
		}
	}
	if len(more) > 0 {
		key.more, m.buf = string(more), more
	}
	key.node = node
	key.asked = len(claims)
	for _, c := range claims {
		spec, ok := m.specs[c]
		if !ok {
			b, err := c.Spec.Marshal()
			if err != nil {
				return answerKey{}, false
			}
			spec = string(b)
			// Only the snapshot's claims are asked about again; a claim
			// made for one question (a pod's extended resources) is not kept.
			if snap.Claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] == c {
				if len(m.specs) >= answersLimit {
					clear(m.specs)
				}
				m.specs[c] = spec
			}
		}
		if len(claims) == 1 {
			key.claims = spec
			break
		}
		key.claims += strconv.Itoa(len(spec)) + ":" + spec
	}
	return key, true
}

// remember records the answer to key (nil: the claims do not fit).
func (m *answers) remember(key answerKey, results []resourcev1.AllocationResult) {
	for i := range results {
		for _, r := range results[i].Devices.Results {
			if r.ShareID != nil {
				return
			}
		}
	}
	if m.known == nil || len(m.known) >= answersLimit {
		m.known = map[answerKey][]resourcev1.AllocationResult{}
	}
	m.known[key] = results
}

func idsOf(sl *resourcev1.ResourceSlice) sliceIDs {
	out := sliceIDs{ids: make([]structured.DeviceID, len(sl.Spec.Devices))}
	devs := snapshot.DevicesOf(sl)
	for i := range sl.Spec.Devices {
		d := &sl.Spec.Devices[i]
		out.ids[i] = devs.ID(d.Name)
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			out.shared = true
		}
	}
	return out
}
