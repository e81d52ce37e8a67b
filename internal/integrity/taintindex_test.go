package integrity

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
)

func slice(name, pool string, devices map[string][]resourcev1.DeviceTaint) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: pool}}}
	for d, taints := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d, Taints: taints})
	}
	return s
}

func gpu(pool, device string) structured.DeviceID {
	return structured.MakeDeviceID("gpu.example.com", pool, device)
}

var (
	ecc  = resourcev1.DeviceTaint{Key: "gpu.example.com/ecc", Value: "fatal", Effect: resourcev1.DeviceTaintEffectNoExecute}
	hold = resourcev1.DeviceTaint{Key: "maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule}
)

func TestTaintIndexFollowsEvents(t *testing.T) {
	type event struct {
		del   bool
		slice *resourcev1.ResourceSlice
	}
	cases := map[string]struct {
		events []event
		want   map[structured.DeviceID][]resourcev1.DeviceTaint
	}{
		"a slice's tainted devices are indexed, untainted ones are not": {
			events: []event{{slice: slice("n0", "n0", map[string][]resourcev1.DeviceTaint{"gpu-0": {ecc}, "gpu-1": nil})}},
			want:   map[structured.DeviceID][]resourcev1.DeviceTaint{gpu("n0", "gpu-0"): {ecc}},
		},
		"an update replaces what the slice said: a taint removed is gone": {
			events: []event{
				{slice: slice("n0", "n0", map[string][]resourcev1.DeviceTaint{"gpu-0": {ecc}})},
				{slice: slice("n0", "n0", map[string][]resourcev1.DeviceTaint{"gpu-0": nil, "gpu-1": {hold}})},
			},
			want: map[structured.DeviceID][]resourcev1.DeviceTaint{gpu("n0", "gpu-1"): {hold}},
		},
		"a deleted slice takes its taints with it, also when its final state is unknown": {
			events: []event{
				{slice: slice("n0", "n0", map[string][]resourcev1.DeviceTaint{"gpu-0": {ecc}})},
				{slice: slice("n1", "n1", map[string][]resourcev1.DeviceTaint{"gpu-0": {ecc}})},
				{del: true, slice: slice("n0", "n0", nil)},
			},
			want: map[structured.DeviceID][]resourcev1.DeviceTaint{gpu("n1", "gpu-0"): {ecc}},
		},
		"a device two slices list (a pool republished) keeps the other's taints when one goes": {
			events: []event{
				{slice: slice("pool-a", "shared", map[string][]resourcev1.DeviceTaint{"gpu-0": {ecc}})},
				{slice: slice("pool-b", "shared", map[string][]resourcev1.DeviceTaint{"gpu-0": {hold}})},
				{del: true, slice: slice("pool-a", "shared", nil)},
			},
			want: map[structured.DeviceID][]resourcev1.DeviceTaint{gpu("shared", "gpu-0"): {hold}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			x := newTaintIndex()
			for i, e := range tc.events {
				switch {
				case e.del && i%2 == 0:
					x.forget(cache.DeletedFinalStateUnknown{Key: e.slice.Name, Obj: e.slice})
				case e.del:
					x.forget(e.slice)
				default:
					x.set(e.slice)
				}
			}
			if diff := cmp.Diff(tc.want, lookupAll(x, tc.want)); diff != "" {
				t.Errorf("taints (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(len(tc.want), len(x.byDevice)); diff != "" {
				t.Errorf("devices indexed (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestTaintIndexMatchesARebuild: after any sequence of slice events, the
// index answers as indexing the slices that exist then from scratch did
// (what every reconcile used to do).
func TestTaintIndexMatchesARebuild(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := newTaintIndex()
	live := map[string]*resourcev1.ResourceSlice{}
	for step := 0; step < 2000; step++ {
		name := fmt.Sprintf("node-%d", r.IntN(8))
		if old := live[name]; old != nil && r.IntN(4) == 0 {
			x.forget(old)
			delete(live, name)
		} else {
			devices := map[string][]resourcev1.DeviceTaint{}
			for d := 0; d < 4; d++ {
				switch r.IntN(4) {
				case 0:
					devices[fmt.Sprintf("gpu-%d", d)] = []resourcev1.DeviceTaint{ecc}
				case 1:
					devices[fmt.Sprintf("gpu-%d", d)] = []resourcev1.DeviceTaint{hold, ecc}
				default:
					devices[fmt.Sprintf("gpu-%d", d)] = nil
				}
			}
			live[name] = slice(name, name, devices)
			x.set(live[name])
		}
		want := rebuild(live)
		if diff := cmp.Diff(want, lookupAll(x, want)); diff != "" {
			t.Fatalf("step %d (-rebuild,+index):\n%s", step, diff)
		}
		if len(x.byDevice) != len(want) {
			t.Fatalf("step %d: %d devices indexed, %d tainted", step, len(x.byDevice), len(want))
		}
	}
}

// rebuild indexes slices from scratch.
func rebuild(slices map[string]*resourcev1.ResourceSlice) map[structured.DeviceID][]resourcev1.DeviceTaint {
	out := map[structured.DeviceID][]resourcev1.DeviceTaint{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if len(d.Taints) > 0 {
				out[structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)] = d.Taints
			}
		}
	}
	return out
}

func lookupAll(x *taintIndex, ids map[structured.DeviceID][]resourcev1.DeviceTaint) map[structured.DeviceID][]resourcev1.DeviceTaint {
	out := map[structured.DeviceID][]resourcev1.DeviceTaint{}
	for id := range ids {
		if t := x.taints(id); t != nil {
			out[id] = t
		}
	}
	return out
}
