package snapshot

import (
	"fmt"
	"maps"
	"math/rand"
	"sort"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// The cache's snapshot, after any sequence of informer events,
// assumptions and cycles that changed the snapshot, equals the snapshot
// built from scratch (New) from the same objects with the assumptions
// applied: incremental updates lose nothing and leave nothing behind.
func TestCacheSnapshotEqualsRebuild(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			w := newWorld(seed)
			for step := 0; step < 300; step++ {
				w.event()
				if w.rng.Intn(3) == 0 {
					snap := w.cache.Update()
					w.compare(t, step, snap)
					w.cycle(snap)
				}
			}
			w.compare(t, -1, w.cache.Update())
		})
	}
}

// world is a small cluster changed at random, with a model of what the
// informers hold and what is assumed.
type world struct {
	rng     *rand.Rand
	cache   *Cache
	clock   *testingclock.FakePassiveClock
	nodes   map[string]*corev1.Node
	pods    map[types.UID]*corev1.Pod
	slices  map[string]*resourcev1.ResourceSlice
	claims  map[types.NamespacedName]*resourcev1.ResourceClaim
	classes map[string]*resourcev1.DeviceClass
	// assumed pods (uid → node) and claims, as the reference applies them.
	aPods   map[types.UID]string
	aClaims map[types.NamespacedName]*resourcev1.ResourceClaim
	pinned  map[types.NamespacedName]bool
	seq     int
}

const (
	worldNodes   = 6
	worldDevices = 4
)

func newWorld(seed int64) *world {
	w := &world{
		rng: rand.New(rand.NewSource(seed)), clock: testingclock.NewFakePassiveClock(time.Unix(1e9, 0)),
		nodes: map[string]*corev1.Node{}, pods: map[types.UID]*corev1.Pod{}, slices: map[string]*resourcev1.ResourceSlice{},
		claims: map[types.NamespacedName]*resourcev1.ResourceClaim{}, classes: map[string]*resourcev1.DeviceClass{},
		aPods: map[types.UID]string{}, aClaims: map[types.NamespacedName]*resourcev1.ResourceClaim{}, pinned: map[types.NamespacedName]bool{},
	}
	w.cache = NewCache(time.Minute, features.Default(), w.clock)
	w.cache.ttl = 1000 * time.Hour // expiry: TestCachePinnedPodOutlivesTTL, TestCacheAssumedClaims
	for i := 0; i < worldNodes; i++ {
		w.addNode(fmt.Sprint("n", i))
	}
	global := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "global"}, Spec: resourcev1.ResourceSliceSpec{Driver: "d", Pool: resourcev1.ResourcePool{Name: "g"}, AllNodes: ptr.To(true), Devices: devices(2)}}
	w.slices[global.Name] = global
	w.cache.AddSlice(global)
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}
	w.classes[class.Name] = class
	w.cache.AddClass(class)
	return w
}

func devices(n int) []resourcev1.Device {
	var out []resourcev1.Device
	for i := 0; i < n; i++ {
		out = append(out, resourcev1.Device{Name: fmt.Sprint("dev-", i)})
	}
	return out
}

func (w *world) addNode(name string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
	w.nodes[name] = n
	w.cache.AddNode(n)
	sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus"}, Spec: resourcev1.ResourceSliceSpec{Driver: "d", Pool: resourcev1.ResourcePool{Name: name}, NodeName: ptr.To(name), Devices: devices(worldDevices)}}
	w.slices[sl.Name] = sl
	w.cache.AddSlice(sl)
}

func (w *world) pick(names []string) string {
	sort.Strings(names)
	return names[w.rng.Intn(len(names))]
}

func (w *world) nodeNames() []string {
	var out []string
	for n := range w.nodes {
		out = append(out, n)
	}
	return out
}

func (w *world) podUIDs() []types.UID {
	var out []types.UID
	for uid := range w.pods {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (w *world) claimKeys() []types.NamespacedName {
	var out []types.NamespacedName
	for k := range w.claims {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// event applies one random change, to the cache and to the model.
func (w *world) event() {
	w.seq++
	w.clock.SetTime(w.clock.Now().Add(time.Second))
	switch r := w.rng.Intn(100); {
	case r < 20: // a new pod, pending or bound, maybe with a host port
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", w.seq), UID: types.UID(fmt.Sprint("p", w.seq))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(1 + w.rng.Intn(3)))}}}}}}
		if w.rng.Intn(4) == 0 {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: int32(8000 + w.rng.Intn(3)), ContainerPort: 80}}
		}
		if w.rng.Intn(2) == 0 {
			p.Spec.NodeName = w.pick(w.nodeNames())
		}
		if w.rng.Intn(5) == 0 {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}}}
		}
		w.pods[p.UID] = p
		w.cache.AddPod(p)
	case r < 35 && len(w.pods) > 0: // a pod changes: bound, finished, resized
		uid := w.podUIDs()[w.rng.Intn(len(w.pods))]
		p := w.pods[uid].DeepCopy()
		switch w.rng.Intn(3) {
		case 0:
			if p.Spec.NodeName == "" {
				p.Spec.NodeName = w.pick(w.nodeNames())
				if n, ok := w.aPods[uid]; ok && w.rng.Intn(2) == 0 {
					p.Spec.NodeName = n // the binding of the assumption
				}
			}
		case 1:
			p.Status.Phase = corev1.PodSucceeded
		case 2:
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(fmt.Sprint(1 + w.rng.Intn(3)))
		}
		if p.Spec.NodeName != "" {
			delete(w.aPods, uid)
		}
		w.pods[uid] = p
		w.cache.UpdatePod(p)
	case r < 42 && len(w.pods) > 0:
		uid := w.podUIDs()[w.rng.Intn(len(w.pods))]
		w.cache.DeletePod(w.pods[uid])
		delete(w.pods, uid)
		delete(w.aPods, uid)
	case r < 50 && len(w.pods) > 0: // assume a pending pod, or forget it
		uid := w.podUIDs()[w.rng.Intn(len(w.pods))]
		p := w.pods[uid]
		if _, ok := w.aPods[uid]; ok {
			w.cache.ForgetPod(uid)
			delete(w.aPods, uid)
		} else if p.Spec.NodeName == "" {
			n := w.pick(w.nodeNames())
			w.cache.AssumePod(p, n, true)
			w.aPods[uid] = n
		}
	case r < 62: // a claim appears, allocated or not
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("c", w.seq)}}
		if w.rng.Intn(2) == 0 {
			c.Status.Allocation = w.allocation()
		}
		w.claims[claimKey(c)] = c
		w.cache.AddClaim(c)
	case r < 72 && len(w.claims) > 0: // a claim is (de)allocated
		key := w.claimKeys()[w.rng.Intn(len(w.claims))]
		c := w.claims[key].DeepCopy()
		if c.Status.Allocation == nil {
			c.Status.Allocation = w.allocation()
		} else {
			c.Status.Allocation = nil
		}
		w.claims[key] = c
		w.cache.UpdateClaim(c)
		if a := w.aClaims[key]; a != nil && !w.pinned[key] && c.Status.Allocation != nil {
			delete(w.aClaims, key) // the informer confirms it
		}
	case r < 76 && len(w.claims) > 0:
		key := w.claimKeys()[w.rng.Intn(len(w.claims))]
		w.cache.DeleteClaim(w.claims[key])
		delete(w.claims, key)
		delete(w.aClaims, key)
	case r < 84 && len(w.claims) > 0: // assume an allocation, pinned or not; or unpin
		key := w.claimKeys()[w.rng.Intn(len(w.claims))]
		if w.aClaims[key] != nil && w.pinned[key] {
			w.cache.UnpinClaim(key)
			w.pinned[key] = false
			if w.claims[key].Status.Allocation != nil {
				delete(w.aClaims, key) // settles on the next Update
			}
			break
		}
		if w.claims[key].Status.Allocation != nil {
			break
		}
		c := w.claims[key].DeepCopy()
		if c.Status.Allocation = w.allocation(); c.Status.Allocation == nil {
			break
		}
		pinned := w.rng.Intn(2) == 0
		w.cache.AssumeClaim(c, pinned)
		// A pin the entry has is kept.
		w.pinned[key] = pinned || w.aClaims[key] != nil && w.pinned[key]
		w.aClaims[key] = c
	case r < 88: // a claim created for extended resources, not seen yet
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("ext", w.seq), Annotations: map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}}}
		if c.Status.Allocation = w.allocation(); c.Status.Allocation == nil {
			break
		}
		w.cache.AssumeClaim(c, true)
		w.aClaims[claimKey(c)], w.pinned[claimKey(c)] = c, true
	case r < 92: // a node goes or comes back
		n := fmt.Sprint("n", w.rng.Intn(worldNodes))
		if node, ok := w.nodes[n]; ok && len(w.nodes) > 1 {
			w.cache.DeleteNode(node)
			delete(w.nodes, n)
			sl := w.slices[n+"-gpus"]
			w.cache.DeleteSlice(sl)
			delete(w.slices, sl.Name)
		} else if !ok {
			w.addNode(n)
		}
	case r < 96: // a slice changes its devices
		n := w.pick(w.nodeNames())
		old := w.slices[n+"-gpus"]
		sl := old.DeepCopy()
		sl.Spec.Devices = devices(1 + w.rng.Intn(worldDevices))
		w.slices[sl.Name] = sl
		w.cache.UpdateSlice(old, sl)
	default: // a node's labels change (its object is replaced)
		n := w.nodes[w.pick(w.nodeNames())].DeepCopy()
		n.Labels = map[string]string{"seq": fmt.Sprint(w.seq)}
		w.nodes[n.Name] = n
		w.cache.UpdateNode(n)
	}
}

// allocation is of a device no claim holds (nil when none is free): the
// cluster never gives one device to two claims.
func (w *world) allocation() *resourcev1.AllocationResult {
	held := map[string]bool{}
	for _, cs := range []map[types.NamespacedName]*resourcev1.ResourceClaim{w.claims, w.aClaims} {
		for _, c := range cs {
			if c.Status.Allocation != nil {
				r := c.Status.Allocation.Devices.Results[0]
				held[r.Pool+"/"+r.Device] = true
			}
		}
	}
	for try := 0; try < 20; try++ {
		pool, dev := fmt.Sprint("n", w.rng.Intn(worldNodes)), fmt.Sprint("dev-", w.rng.Intn(worldDevices))
		if w.rng.Intn(8) == 0 {
			pool, dev = "g", fmt.Sprint("dev-", w.rng.Intn(2))
		}
		if !held[pool+"/"+dev] {
			return allocationOf(pool, dev)
		}
	}
	return nil
}

func allocationOf(pool, dev string) *resourcev1.AllocationResult {
	return &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Request: "r", Driver: "d", Pool: pool, Device: dev}}}}
}

// cycle changes the snapshot as a scheduling cycle would, leaving some of
// it applied: the next Update must undo all of it.
func (w *world) cycle(s *Snapshot) {
	if len(s.Nodes) == 0 {
		return
	}
	ni := s.Nodes[w.rng.Intn(len(s.Nodes))]
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cycle", UID: "cycle"}}
	s.PlacePod(ni, p, Resources{MilliCPU: 1000, Pods: 1}, []string{"TCP/0.0.0.0/9000"})
	anyDevice := func() *resourcev1.AllocationResult {
		return allocationOf(fmt.Sprint("n", w.rng.Intn(worldNodes)), fmt.Sprint("dev-", w.rng.Intn(worldDevices)))
	}
	s.Reserve(s.Nodes[w.rng.Intn(len(s.Nodes))].Node.Name, p, []*resourcev1.ResourceClaim{{Status: resourcev1.ResourceClaimStatus{Allocation: anyDevice()}}})
	for _, key := range w.claimKeys() {
		if c := s.Claims[key]; c != nil && c.Status.Allocation == nil {
			cp := c.DeepCopy()
			cp.Status.Allocation = anyDevice()
			s.AssumeClaim(cp)
			break
		}
	}
	ext := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cycle-ext"}, Status: resourcev1.ResourceClaimStatus{Allocation: anyDevice()}}
	s.AssumeClaim(ext)
	for _, uid := range w.podUIDs() {
		if bp := w.pods[uid]; bp.Spec.NodeName != "" && bp.Status.Phase != corev1.PodSucceeded {
			s.RemovePod(bp, PodRequests(bp, s.Features), HostPorts(bp))
			break
		}
	}
}

// reference is the snapshot New builds from the model's objects, with the
// assumptions applied as the scheduler applies them.
func (w *world) reference() *Snapshot {
	in := Input{Features: features.Default()}
	for _, n := range w.nodes {
		in.Nodes = append(in.Nodes, n)
	}
	for uid, p := range w.pods {
		if n, ok := w.aPods[uid]; ok {
			p = p.DeepCopy()
			p.Spec.NodeName = n
		}
		in.Pods = append(in.Pods, p)
	}
	for _, sl := range w.slices {
		in.Slices = append(in.Slices, sl)
	}
	for _, c := range w.classes {
		in.Classes = append(in.Classes, c)
	}
	for key, c := range w.claims {
		if a := w.aClaims[key]; a != nil {
			c = a
		}
		in.Claims = append(in.Claims, c)
	}
	for key, a := range w.aClaims {
		if _, ok := w.claims[key]; !ok && isExtendedClaim(a) {
			in.Claims = append(in.Claims, a)
		}
	}
	return New(in)
}

func (w *world) compare(t *testing.T, step int, got *Snapshot) {
	t.Helper()
	want := w.reference()
	if len(got.Nodes) != len(want.Nodes) {
		t.Fatalf("step %d: %d nodes, want %d", step, len(got.Nodes), len(want.Nodes))
	}
	for i, wn := range want.Nodes {
		gn := got.Nodes[i]
		name := wn.Node.Name
		switch {
		case gn.Node != wn.Node:
			t.Fatalf("step %d: node %d is %s (%p), want %s (%p)", step, i, gn.Node.Name, gn.Node, name, wn.Node)
		case !gn.Requested.Equal(wn.Requested):
			t.Fatalf("step %d: node %s requests %+v, want %+v", step, name, gn.Requested, wn.Requested)
		case !gn.UsedPorts.Equal(wn.UsedPorts):
			t.Fatalf("step %d: node %s ports %v, want %v", step, name, gn.UsedPorts.UnsortedList(), wn.UsedPorts.UnsortedList())
		case gn.FreeDevices() != wn.FreeDevices():
			t.Fatalf("step %d: node %s has %d free devices, want %d", step, name, gn.FreeDevices(), wn.FreeDevices())
		case !sameSlices(gn.Slices, wn.Slices):
			t.Fatalf("step %d: node %s slices differ", step, name)
		}
		if got.Node(name) != gn {
			t.Fatalf("step %d: Node(%s) is not the listed NodeInfo", step, name)
		}
	}
	if !got.Allocated.Equal(want.Allocated) {
		t.Fatalf("step %d: allocated %v, want %v", step, got.Allocated.UnsortedList(), want.Allocated.UnsortedList())
	}
	if len(got.Claims) != len(want.Claims) {
		t.Fatalf("step %d: %d claims, want %d", step, len(got.Claims), len(want.Claims))
	}
	for key, wc := range want.Claims {
		if got.Claims[key] != wc {
			t.Fatalf("step %d: claim %s is not the cache's version", step, key)
		}
	}
	if !sameSlices(got.GlobalSlices, want.GlobalSlices) || len(got.Classes) != len(want.Classes) {
		t.Fatalf("step %d: global slices or classes differ", step)
	}
	anti, onNodes := 0, 0
	for uid, p := range w.pods {
		node := p.Spec.NodeName
		if n, ok := w.aPods[uid]; ok {
			node = n
		}
		if node != "" && p.Status.Phase != corev1.PodSucceeded {
			onNodes++
			if HasRequiredAntiAffinity(p) {
				anti++
			}
		}
	}
	if got := w.cache.AntiAffinityPods(); got != anti {
		t.Fatalf("step %d: %d pods with required anti-affinity on nodes, want %d", step, got, anti)
	}
	if got := len(w.cache.Pods()); got != onNodes {
		t.Fatalf("step %d: Pods() has %d pods, want the %d on nodes", step, got, onNodes)
	}
	for i, n := range got.NodeObjects() {
		if n != want.Nodes[i].Node {
			t.Fatalf("step %d: NodeObjects()[%d] is %s, not the snapshot's node", step, i, n.Name)
		}
	}
}

func sameSlices(a, b []*resourcev1.ResourceSlice) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[*resourcev1.ResourceSlice]bool{}
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			return false
		}
	}
	return true
}

// A claim the scheduler created is held (assumed) until the informer shows
// it, and not after it was deleted; an assumed existing claim that the
// informer no longer has is not brought back; an assumption that is not
// pinned ends when its ttl passes.
func TestCacheAssumedClaims(t *testing.T) {
	now := testingclock.NewFakePassiveClock(time.Unix(1e9, 0))
	c := NewCache(time.Minute, features.Default(), now)
	alloc := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Driver: "d", Pool: "p", Device: "0"}}}}
	created := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-extended-resources-abcde", Annotations: map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}},
		Status:     resourcev1.ResourceClaimStatus{Allocation: alloc, ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}},
	}
	existing := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "template-claim"}, Status: created.Status}
	c.AssumeClaim(created, false)
	c.AssumeClaim(existing, false)
	if got := claimNames(c.Update()); len(got) != 1 || got[0] != created.Name {
		t.Fatalf("before the informer shows it: claims %v, want only the created claim", got)
	}
	c.AddClaim(created)
	if got := claimNames(c.Update()); len(got) != 1 {
		t.Fatalf("informer shows it: claims %v", got)
	}
	if _, n := c.Assumptions(); n != 1 {
		t.Errorf("the informer's claim confirmed the created claim: %d assumptions, want 1 (the existing claim's)", n)
	}
	c.AssumeClaim(created, false)
	c.DeleteClaim(created)
	if got := claimNames(c.Update()); len(got) != 0 {
		t.Errorf("after deletion: claims %v, want none", got)
	}
	now.SetTime(now.Now().Add(2 * time.Minute))
	c.Update()
	if _, n := c.Assumptions(); n != 0 {
		t.Errorf("after the ttl: %d claims assumed, want 0", n)
	}
}

// A pinned pod assumption holds its node past the ttl; unpinned, it ends
// once the ttl passes, and the node's requests go back.
func TestCachePinnedPodOutlivesTTL(t *testing.T) {
	now := testingclock.NewFakePassiveClock(time.Unix(1e9, 0))
	c := NewCache(time.Minute, features.Default(), now)
	c.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
	c.AddPod(p)
	c.AssumePod(p, "n", true)
	now.SetTime(now.Now().Add(time.Hour))
	if got := c.Update().Node("n").Requested.Pods; got != 1 {
		t.Fatalf("pinned for an hour: node holds %d pods, want 1", got)
	}
	c.UnpinPod(p.UID)
	now.SetTime(now.Now().Add(30 * time.Second))
	if got := c.Update().Node("n").Requested.Pods; got != 1 {
		t.Fatalf("unpinned 30s ago: node holds %d pods, want 1", got)
	}
	now.SetTime(now.Now().Add(time.Minute))
	if got := c.Update().Node("n").Requested.Pods; got != 0 {
		t.Errorf("unpinned past the ttl: node holds %d pods, want 0", got)
	}
}

// AssumedNodes reads the pods assumed now, with their nodes, at once.
func TestCacheAssumedNodes(t *testing.T) {
	c := NewCache(time.Minute, features.Default(), testingclock.NewFakePassiveClock(time.Unix(1e9, 0)))
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b", "c"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		c.AddPod(p)
		pods = append(pods, p)
	}
	if got := c.AssumedNodes(); got != nil {
		t.Fatalf("nothing assumed: got %v", got)
	}
	c.AssumePod(pods[0], "n1", true)
	c.AssumePod(pods[1], "n2", false)
	want := map[types.UID]string{"a": "n1", "b": "n2"}
	if got := c.AssumedNodes(); !maps.Equal(got, want) {
		t.Fatalf("two assumed: got %v, want %v", got, want)
	}
	c.ForgetPod(pods[0].UID)
	if got := c.AssumedNodes(); !maps.Equal(got, map[types.UID]string{"b": "n2"}) {
		t.Errorf("one forgotten: got %v, want only b on n2", got)
	}
}

// A decision reads a pod's requests from the cache, which computed them at
// the pod's event, pending or bound, for that very object: equal to
// PodRequests, not computed again in the cycle, a copy the caller may
// change, and a newer object's own.
func TestCacheRemembersPodRequests(t *testing.T) {
	f := features.Default()
	c := NewCache(time.Minute, f, clock.RealClock{})
	pod := func(name, cpu string, gpus int64) *corev1.Pod {
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		if gpus > 0 {
			req["example.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}}
	}
	pending, plain := pod("pending", "2", 1), pod("plain", "1", 0)
	bound := pod("bound", "4", 2)
	bound.Spec.NodeName = "n"
	c.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	for _, p := range []*corev1.Pod{pending, plain, bound} {
		c.AddPod(p)
	}
	snap := c.Update()
	for _, p := range []*corev1.Pod{pending, plain, bound} {
		if got, want := snap.Requests(p), PodRequests(p, f); !got.Equal(want) {
			t.Errorf("%s: requests %+v, want %+v", p.Name, got, want)
		}
	}

	got := snap.Requests(pending)
	got.MilliCPU, got.Scalar["example.com/gpu"] = 1, 99
	if again := snap.Requests(pending); again.MilliCPU != 2000 || again.Scalar["example.com/gpu"] != 1 {
		t.Errorf("a caller's change reached the cache: requests now %+v", again)
	}

	// Computing them allocates; reading what the cache computed does not.
	if n := testing.AllocsPerRun(20, func() { _ = PodRequests(plain, f) }); n == 0 {
		t.Fatal("PodRequests does not allocate: this test cannot tell a remembered value from a computed one")
	}
	if n := testing.AllocsPerRun(20, func() { _ = snap.Requests(plain) }); n != 0 {
		t.Errorf("reading a cached pod's requests allocated %.0f times: computed again", n)
	}

	// A newer object of the pod: its own requests; the older object,
	// which the cache no longer holds, and a pod it never held, are
	// computed.
	newer := pending.DeepCopy()
	newer.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
	c.UpdatePod(newer)
	stranger := pod("stranger", "5", 0)
	snap = c.Update()
	for _, tc := range []struct {
		p    *corev1.Pod
		want int64
	}{{newer, 3000}, {pending, 2000}, {stranger, 5000}} {
		if got := snap.Requests(tc.p).MilliCPU; got != tc.want {
			t.Errorf("%s (%p): %d millicores, want %d", tc.p.Name, tc.p, got, tc.want)
		}
	}
	if got := snap.Node("n").Requested.MilliCPU; got != 4000 {
		t.Errorf("node n: %d millicores requested, want the bound pod's 4000 (pending pods count on no node)", got)
	}
	c.DeletePod(bound)
	if got := c.Update().Node("n").Requested.MilliCPU; got != 0 {
		t.Errorf("bound pod deleted: node n still holds %d millicores", got)
	}
}

func claimNames(s *Snapshot) []string {
	var out []string
	for k := range s.Claims {
		out = append(out, k.Name)
	}
	sort.Strings(out)
	return out
}

// While a pod's extended resources are bound, the binder's in-memory claim
// and the claim it created hold the same device; dropping the in-memory one
// (the binding settled, the informer has not shown the created claim's
// allocation yet) leaves the device held.
func TestCacheDeviceHeldByTwoClaimsStaysHeld(t *testing.T) {
	c := NewCache(time.Minute, features.Default(), clock.RealClock{})
	alloc := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{Driver: "d", Pool: "p", Device: "0"}}}}
	ext := map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"}
	inMemory := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-extended-resources", Annotations: ext}, Status: resourcev1.ResourceClaimStatus{Allocation: alloc}}
	created := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p-extended-resources-abcde", Annotations: ext}, Status: resourcev1.ResourceClaimStatus{Allocation: alloc}}
	device := structured.MakeDeviceID("d", "p", "0")
	c.AssumeClaim(inMemory, true)
	if s := c.Update(); !s.Allocated.Has(device) {
		t.Fatal("the in-memory claim does not hold its device")
	}
	c.AssumeClaim(created, true)
	c.Update()
	c.ForgetClaim(types.NamespacedName{Namespace: "ns", Name: inMemory.Name})
	if s := c.Update(); !s.Allocated.Has(device) {
		t.Error("the device was freed while the created claim still holds it")
	}
	c.ForgetClaim(types.NamespacedName{Namespace: "ns", Name: created.Name})
	if s := c.Update(); s.Allocated.Has(device) {
		t.Error("the device is still held after both claims are gone")
	}
}

// A node's capacity type is read from its labels when the node enters the
// snapshot, and again when it is relabelled.
func TestNodeCapacityTypeFollowsLabels(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{podgroup.LabelEKSCapacityType: "ON_DEMAND"}}}
	c := NewCache(time.Minute, features.Default(), testingclock.NewFakePassiveClock(time.Unix(1e9, 0)))
	c.AddNode(n)
	if got := c.Update().Node("n1").CapacityType(); got != podgroup.OnDemand {
		t.Errorf("capacity type %q, want %q", got, podgroup.OnDemand)
	}
	spot := n.DeepCopy()
	spot.Labels[podgroup.LabelKarpenterCapacityType] = string(podgroup.Spot)
	c.UpdateNode(spot)
	if got := c.Update().Node("n1").CapacityType(); got != podgroup.Spot {
		t.Errorf("relabelled: capacity type %q, want %q", got, podgroup.Spot)
	}
	if got := New(Input{Nodes: []*corev1.Node{spot}}).Node("n1").CapacityType(); got != podgroup.Spot {
		t.Errorf("a snapshot built from the node: capacity type %q, want %q", got, podgroup.Spot)
	}
	if got := (&NodeInfo{Node: spot}).CapacityType(); got != podgroup.Spot {
		t.Errorf("a NodeInfo built by hand: capacity type %q, want %q", got, podgroup.Spot)
	}
}
