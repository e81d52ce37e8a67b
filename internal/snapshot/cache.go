package snapshot

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/clock"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Cache is the cluster as the scheduler decides from it, kept current by
// informer events and by the scheduler's own decisions, modelled on
// kube-scheduler's cache (pkg/scheduler/backend/cache). Per node it keeps
// what its pods request and the host ports they use, computed once per pod
// event rather than once per pod per cycle; it keeps the claims and what
// their allocations hold; and it holds the decisions being written that the
// informers have not shown yet (assumed pods and claims):
//
//	          Assume (pinned: its binding is in flight)
//	(none) ──────────────────► Assumed ─── informer shows it ──► (none: an ordinary cached object)
//	                            │    │
//	                    Forget  │    │ Unpin: the ttl starts
//	      (rollback, deletion)  ▼    ▼
//	                         (none) ◄── ttl passes unpinned (the write was lost)
//
// Update brings the cache's one long-lived Snapshot up to date: it undoes
// what the last cycle did to it (journal), copies again only the nodes that
// changed since (or that the cycle changed), and re-applies only the claims
// that changed — kube-scheduler's UpdateSnapshot over generation-ordered
// node infos, here a set of changed names since one snapshot is served.
// A cycle's cost is thus proportional to what changed, not to the cluster.
type Cache struct {
	mu       sync.Mutex
	ttl      time.Duration
	clock    clock.PassiveClock
	features features.Features

	nodes   map[string]*nodeItem
	pods    map[types.UID]*podItem
	claims  map[types.NamespacedName]*claimItem
	global  map[string]*resourcev1.ResourceSlice
	classes map[string]*resourcev1.DeviceClass
	// assumedPods and assumedClaims index the entries holding an
	// assumption (Update expires them).
	assumedPods   map[types.UID]struct{}
	assumedClaims map[types.NamespacedName]struct{}

	// What changed since the last Update.
	dirtyNodes     map[string]struct{}
	dirtyClaims    map[types.NamespacedName]struct{}
	nodeSetChanged bool
	globalChanged  bool
	classesChanged bool

	// antiAffinity counts the pods on a node with required anti-affinity.
	antiAffinity int

	// nominations are the capacity held for preemptors, by unit key
	// (Nomination).
	nominations map[string]*Nomination
	// holders counts, per device, the claims of the snapshot's Claims (as
	// Update leaves them) that hold it.
	holders map[structured.DeviceID]int

	snap *Snapshot
}

// nodeItem is what the cache knows of a node name: the node (nil while only
// pods or slices name it) and the sums over its pods and slices.
type nodeItem struct {
	node        *corev1.Node
	allocatable Resources
	requested   Resources
	ports       map[string]int
	pods        int
	slices      map[string]*resourcev1.ResourceSlice
}

// podItem is a pod and where it counts. on is the node whose sums include
// req and ports ("" for none).
type podItem struct {
	pod   *corev1.Pod
	seen  bool // the informer has it (else only an assumption made it)
	on    string
	req   Resources
	ports []string
	// counted is the pod object req and ports were computed from (nil:
	// none); objects are replaced, never changed, so an assumption or its
	// end does not compute them again. They are counted on the node on
	// (none: only remembered, for requestsOf).
	counted *corev1.Pod
	// view is the pod as the cycle's pod constraints see it (with an
	// assumed node), built on demand; anti is whether it has required
	// pod anti-affinity (counted while on a node).
	view *corev1.Pod
	anti bool
	// the assumption, when assumed
	assumed bool
	node    string
	at      time.Time
	pinned  bool
}

type claimItem struct {
	informer *resourcev1.ResourceClaim
	assumed  *resourcev1.ResourceClaim
	at       time.Time
	pinned   bool
}

// NewCache returns an empty cache whose snapshots decide with f;
// assumptions that are not pinned expire after ttl on clk.
func NewCache(ttl time.Duration, f features.Features, clk clock.PassiveClock) *Cache {
	return &Cache{
		ttl:           ttl,
		clock:         clk,
		features:      f,
		nodes:         map[string]*nodeItem{},
		pods:          map[types.UID]*podItem{},
		claims:        map[types.NamespacedName]*claimItem{},
		global:        map[string]*resourcev1.ResourceSlice{},
		classes:       map[string]*resourcev1.DeviceClass{},
		assumedPods:   map[types.UID]struct{}{},
		assumedClaims: map[types.NamespacedName]struct{}{},
		dirtyNodes:    map[string]struct{}{},
		dirtyClaims:   map[types.NamespacedName]struct{}{},
		nominations:   map[string]*Nomination{},
		holders:       map[structured.DeviceID]int{},
	}
}

// CacheFrom is a cache holding the input's objects (explain and benchmarks
// build their snapshots through the scheduler's path with it).
func CacheFrom(in Input) *Cache {
	c := NewCache(time.Minute, in.Features, clock.RealClock{})
	for _, n := range in.Nodes {
		c.AddNode(n)
	}
	for _, p := range in.Pods {
		c.AddPod(p)
	}
	for _, sl := range in.Slices {
		c.AddSlice(sl)
	}
	for _, cl := range in.Classes {
		c.AddClass(cl)
	}
	for _, cl := range in.Claims {
		c.AddClaim(cl)
	}
	return c
}

func (c *Cache) item(name string) *nodeItem {
	it := c.nodes[name]
	if it == nil {
		it = &nodeItem{ports: map[string]int{}, slices: map[string]*resourcev1.ResourceSlice{}}
		c.nodes[name] = it
	}
	return it
}

func (c *Cache) dirty(name string) { c.dirtyNodes[name] = struct{}{} }

// gc drops an item nothing names any more.
func (c *Cache) gc(name string) {
	if it := c.nodes[name]; it != nil && it.node == nil && it.pods == 0 && len(it.slices) == 0 {
		delete(c.nodes, name)
	}
}

// AddNode and UpdateNode record a node.
func (c *Cache) AddNode(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it := c.item(n.Name)
	if it.node == nil {
		c.nodeSetChanged = true
	}
	it.node, it.allocatable = n, FromList(n.Status.Allocatable)
	c.dirty(n.Name)
}

// UpdateNode records a node's new version.
func (c *Cache) UpdateNode(n *corev1.Node) { c.AddNode(n) }

// DeleteNode forgets a node (its pods stay counted under its name, as
// kube-scheduler keeps them, until they are deleted).
func (c *Cache) DeleteNode(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if it := c.nodes[n.Name]; it != nil && it.node != nil {
		it.node = nil
		c.nodeSetChanged = true
		c.gc(n.Name)
	}
}

// target is the node a pod counts on: its assumed node, else its bound
// node; none when terminal.
func (pi *podItem) target() string {
	if pi.pod == nil || pi.pod.Status.Phase == corev1.PodSucceeded || pi.pod.Status.Phase == corev1.PodFailed {
		return ""
	}
	if pi.assumed {
		return pi.node
	}
	return pi.pod.Spec.NodeName
}

// recount moves a pod's requests and ports to the node it counts on now.
// They are computed once per pod object, pending or not: a decision reads
// a pending member's requests from here (requestsOf) instead of computing
// them again in each cycle.
func (c *Cache) recount(pi *podItem) {
	pi.view = nil
	target := pi.target()
	req, ports := pi.req, pi.ports
	switch {
	case pi.pod == nil:
		req, ports = Resources{}, nil
	case pi.counted != pi.pod:
		req, ports = PodRequests(pi.pod, c.features), HostPorts(pi.pod)
	}
	pi.counted = pi.pod
	if target == pi.on && req.Equal(pi.req) && sameStrings(ports, pi.ports) {
		return
	}
	if pi.on != "" {
		it := c.nodes[pi.on]
		it.requested.Sub(pi.req)
		for _, p := range pi.ports {
			if it.ports[p]--; it.ports[p] <= 0 {
				delete(it.ports, p)
			}
		}
		it.pods--
		if pi.anti {
			c.antiAffinity--
		}
		c.dirty(pi.on)
		c.gc(pi.on)
	}
	pi.on, pi.req, pi.ports = target, req, ports
	if target != "" {
		it := c.item(target)
		it.requested.Add(req)
		for _, p := range ports {
			it.ports[p]++
		}
		it.pods++
		if pi.anti = HasRequiredAntiAffinity(pi.pod); pi.anti {
			c.antiAffinity++
		}
		c.dirty(target)
	}
}

// requestsOf is what p requests, as computed at p's event, when the cache
// holds that very object (a pod is replaced at each change, never
// changed): a copy, the caller's to change.
func (c *Cache) requestsOf(p *corev1.Pod) (Resources, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pi := c.pods[p.UID]
	if pi == nil || pi.pod != p || pi.counted != p {
		return Resources{}, false
	}
	return pi.req.Clone(), true
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// AddPod and UpdatePod record a pod's current version. A pod the informer
// shows bound confirms (ends) its assumption.
func (c *Cache) AddPod(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pi := c.pods[p.UID]
	if pi == nil {
		pi = &podItem{}
		c.pods[p.UID] = pi
	}
	pi.pod, pi.seen = p, true
	if pi.assumed && p.Spec.NodeName != "" {
		c.endPodAssumption(p.UID, pi)
	}
	c.recount(pi)
}

// UpdatePod records a pod's new version.
func (c *Cache) UpdatePod(p *corev1.Pod) { c.AddPod(p) }

// DeletePod forgets a pod and any assumption about it.
func (c *Cache) DeletePod(p *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pi := c.pods[p.UID]
	if pi == nil {
		return
	}
	c.endPodAssumption(p.UID, pi)
	pi.pod = nil
	c.recount(pi)
	delete(c.pods, p.UID)
}

func (c *Cache) endPodAssumption(uid types.UID, pi *podItem) {
	pi.assumed, pi.pinned = false, false
	delete(c.assumedPods, uid)
}

// AssumePod records p as placed on node before the informer shows it bound;
// pinned, it does not expire (its binding is in flight) until UnpinPod.
func (c *Cache) AssumePod(p *corev1.Pod, node string, pinned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pi := c.pods[p.UID]
	if pi == nil {
		// The scheduler read it from the lister before this cache's
		// handler saw it.
		pi = &podItem{pod: p}
		c.pods[p.UID] = pi
	}
	pi.assumed, pi.node, pi.at, pi.pinned = true, node, c.clock.Now(), pinned
	c.assumedPods[p.UID] = struct{}{}
	c.recount(pi)
}

// UnpinPod starts the ttl of a pod's assumption.
func (c *Cache) UnpinPod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pi := c.pods[uid]; pi != nil && pi.assumed {
		pi.pinned, pi.at = false, c.clock.Now()
	}
}

// ForgetPod drops a pod's assumption (its placement was rolled back).
func (c *Cache) ForgetPod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetPod(uid)
}

func (c *Cache) forgetPod(uid types.UID) {
	pi := c.pods[uid]
	if pi == nil || !pi.assumed {
		return
	}
	c.endPodAssumption(uid, pi)
	c.recount(pi)
	if !pi.seen {
		pi.pod = nil
		c.recount(pi)
		delete(c.pods, uid)
	}
}

// AssumedNodes are the pods assumed now and their nodes, read under one
// lock (nil when none is): a lookup for many pods at once, as resolving a
// unit of thousands of members does, without taking the lock the informers
// update the cache under once per pod.
func (c *Cache) AssumedNodes() map[types.UID]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.assumedPods) == 0 {
		return nil
	}
	out := make(map[types.UID]string, len(c.assumedPods))
	for uid := range c.assumedPods {
		out[uid] = c.pods[uid].node
	}
	return out
}

// Assumptions counts the pods and claims assumed now.
func (c *Cache) Assumptions() (pods, claims int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.assumedPods), len(c.assumedClaims)
}

// AntiAffinityPods counts the pods that count on a node and have required
// pod anti-affinity (while there are none, a pod without constraints of its
// own needs no inter-pod check).
func (c *Cache) AntiAffinityPods() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.antiAffinity
}

// HasRequiredAntiAffinity reports whether a pod has required pod
// anti-affinity terms.
func HasRequiredAntiAffinity(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// Pods are the pods that count on a node — bound, or assumed (then with
// the assumed node) — for the cycle's pod constraints.
func (c *Cache) Pods() []*corev1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(c.pods))
	for _, pi := range c.pods {
		if pi.on == "" {
			continue
		}
		if pi.view == nil {
			pi.view = pi.pod
			if pi.pod.Spec.NodeName != pi.on {
				cp := *pi.pod
				cp.Spec.NodeName = pi.on
				pi.view = &cp
			}
		}
		out = append(out, pi.view)
	}
	return out
}

func claimKey(c *resourcev1.ResourceClaim) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

func (c *Cache) claim(key types.NamespacedName) *claimItem {
	ci := c.claims[key]
	if ci == nil {
		ci = &claimItem{}
		c.claims[key] = ci
	}
	return ci
}

// effective is the claim as cycles see it: the assumed version while there
// is one — of a claim the informer has, or of one the scheduler created
// for extended resources that the informer has not shown yet.
func (ci *claimItem) effective() *resourcev1.ResourceClaim {
	if ci.assumed != nil && (ci.informer != nil || isExtendedClaim(ci.assumed)) {
		return ci.assumed
	}
	return ci.informer
}

func isExtendedClaim(c *resourcev1.ResourceClaim) bool {
	return c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] == "true"
}

// AddClaim and UpdateClaim record a claim's current version; one that
// shows an assumption written (allocated, with at least the assumed
// reservations) confirms it.
func (c *Cache) AddClaim(cl *resourcev1.ResourceClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := claimKey(cl)
	c.claim(key).informer = cl
	c.dirtyClaims[key] = struct{}{}
	c.settleClaim(key, c.clock.Now())
}

// UpdateClaim records a claim's new version.
func (c *Cache) UpdateClaim(cl *resourcev1.ResourceClaim) { c.AddClaim(cl) }

// DeleteClaim forgets a claim and any assumption about it (a claim the
// scheduler created and still assumes must not outlive its deletion).
func (c *Cache) DeleteClaim(cl *resourcev1.ResourceClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := claimKey(cl)
	if ci := c.claims[key]; ci != nil {
		ci.informer = nil
		c.forgetClaim(key)
	}
}

// AssumeClaim records a claim as written (or, pinned, as about to be
// written by a binding in flight); a pin the entry has is kept.
func (c *Cache) AssumeClaim(cl *resourcev1.ResourceClaim, pinned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := claimKey(cl)
	ci := c.claim(key)
	ci.pinned = pinned || ci.assumed != nil && ci.pinned
	ci.assumed, ci.at = cl, c.clock.Now()
	c.assumedClaims[key] = struct{}{}
	c.dirtyClaims[key] = struct{}{}
}

// UnpinClaim starts the ttl of a claim's assumption.
func (c *Cache) UnpinClaim(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ci := c.claims[key]; ci != nil && ci.assumed != nil {
		ci.pinned, ci.at = false, c.clock.Now()
		c.settleClaim(key, ci.at)
	}
}

// ForgetClaim drops a claim's assumption.
func (c *Cache) ForgetClaim(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetClaim(key)
}

func (c *Cache) forgetClaim(key types.NamespacedName) {
	ci := c.claims[key]
	if ci == nil {
		return
	}
	ci.assumed, ci.pinned = nil, false
	delete(c.assumedClaims, key)
	c.dirtyClaims[key] = struct{}{}
	if ci.informer == nil {
		delete(c.claims, key)
	}
}

// settleClaim ends a claim's assumption that is not pinned once the
// informer shows the allocation with at least the assumed reservations, or
// once the ttl passed.
func (c *Cache) settleClaim(key types.NamespacedName, now time.Time) {
	ci := c.claims[key]
	if ci == nil || ci.assumed == nil || ci.pinned {
		return
	}
	in := ci.informer
	if in != nil && in.Status.Allocation != nil && len(in.Status.ReservedFor) >= len(ci.assumed.Status.ReservedFor) || now.Sub(ci.at) > c.ttl {
		c.forgetClaim(key)
	}
}

// AddSlice and UpdateSlice record a ResourceSlice (as the DRA tracker
// delivers it, DeviceTaintRules applied).
func (c *Cache) AddSlice(sl *resourcev1.ResourceSlice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addSlice(sl)
}

// UpdateSlice records a slice's new version.
func (c *Cache) UpdateSlice(old, sl *resourcev1.ResourceSlice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeSlice(old)
	c.addSlice(sl)
}

// DeleteSlice forgets a slice.
func (c *Cache) DeleteSlice(sl *resourcev1.ResourceSlice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeSlice(sl)
}

func sliceNode(sl *resourcev1.ResourceSlice) string {
	if sl.Spec.NodeName != nil {
		return *sl.Spec.NodeName
	}
	return ""
}

func (c *Cache) addSlice(sl *resourcev1.ResourceSlice) {
	if n := sliceNode(sl); n != "" {
		c.item(n).slices[sl.Name] = sl
		c.dirty(n)
		return
	}
	c.global[sl.Name] = sl
	c.globalChanged = true
}

func (c *Cache) removeSlice(sl *resourcev1.ResourceSlice) {
	if n := sliceNode(sl); n != "" {
		if it := c.nodes[n]; it != nil {
			delete(it.slices, sl.Name)
			c.dirty(n)
			c.gc(n)
		}
		return
	}
	delete(c.global, sl.Name)
	c.globalChanged = true
}

// AddClass and UpdateClass record a DeviceClass.
func (c *Cache) AddClass(cl *resourcev1.DeviceClass) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.classes[cl.Name] = cl
	c.classesChanged = true
}

// UpdateClass records a class's new version.
func (c *Cache) UpdateClass(cl *resourcev1.DeviceClass) { c.AddClass(cl) }

// DeleteClass forgets a class.
func (c *Cache) DeleteClass(cl *resourcev1.DeviceClass) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.classes, cl.Name)
	c.classesChanged = true
}

// Update expires assumptions whose ttl passed and returns the cache's
// snapshot brought up to date. The snapshot is the caller's until the next
// Update (one caller: the scheduling loop); what a cycle does to it is
// undone by that next Update.
func (c *Cache) Update() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for uid := range c.assumedPods {
		if pi := c.pods[uid]; !pi.pinned && now.Sub(pi.at) > c.ttl {
			c.forgetPod(uid)
		}
	}
	for key := range c.assumedClaims {
		c.settleClaim(key, now)
	}
	s := c.snap
	if s == nil {
		s = New(Input{Features: c.features})
		s.requests = c.requestsOf
		c.snap, c.nodeSetChanged, c.globalChanged, c.classesChanged = s, true, true, true
	}
	s.tracked = false
	for i := len(s.journal) - 1; i >= 0; i-- {
		s.journal[i]()
	}
	s.journal = nil
	s.Constraints = nil
	c.updateClaims(s)
	c.updateNodes(s)
	if c.globalChanged {
		s.GlobalSlices = sortedSlices(c.global)
		c.globalChanged = false
	}
	if c.classesChanged {
		s.Classes = make(map[string]*resourcev1.DeviceClass, len(c.classes))
		for n, cl := range c.classes {
			s.Classes[n] = cl
		}
		s.extended = nil
		c.classesChanged = false
	}
	s.tracked, s.touched = true, map[string]bool{}
	return s
}

// updateClaims applies the claims that changed: every release before any
// hold, so a device that moved from one claim to another stays held.
func (c *Cache) updateClaims(s *Snapshot) {
	type change struct {
		key      types.NamespacedName
		old, new *resourcev1.ResourceClaim
	}
	var changes []change
	for key := range c.dirtyClaims {
		var cur *resourcev1.ResourceClaim
		if ci := c.claims[key]; ci != nil {
			cur = ci.effective()
		}
		if old := s.Claims[key]; old != cur {
			changes = append(changes, change{key, old, cur})
		}
	}
	clear(c.dirtyClaims)
	var released []structured.DeviceID
	for _, ch := range changes {
		old := ClaimDevices(ch.old)
		s.releaseClaim(ch.old, old)
		released = append(released, old...)
		c.countHolders(old, -1)
	}
	for _, ch := range changes {
		if ch.new == nil {
			delete(s.Claims, ch.key)
			continue
		}
		s.Claims[ch.key] = ch.new
		held := ClaimDevices(ch.new)
		s.holdClaim(ch.new, held)
		c.countHolders(held, +1)
	}
	// Two claims can hold one device for a while: the binder's in-memory
	// claim for a pod's extended resources and the claim it created for
	// them, both assumed until the informer shows the created one. Releasing
	// one must not free what the other still holds, so a device released
	// and not held again is allocated again if another claim has it
	// (holders counts, per device, the claims of s.Claims that hold it).
	for _, id := range released {
		if !s.Allocated.Has(id) && c.holders[id] > 0 {
			s.Allocate(id)
		}
	}
}

// countHolders adds d to the count of claims holding each device.
func (c *Cache) countHolders(ids []structured.DeviceID, d int) {
	for _, id := range ids {
		if n := c.holders[id] + d; n > 0 {
			c.holders[id] = n
		} else {
			delete(c.holders, id)
		}
	}
}

// updateNodes copies again the nodes that changed in the cache or in the
// last cycle; all of them when nodes came or went.
func (c *Cache) updateNodes(s *Snapshot) {
	if c.nodeSetChanged {
		names := make([]string, 0, len(c.nodes))
		for name, it := range c.nodes {
			if it.node != nil {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		s.Nodes = make([]*NodeInfo, len(names))
		s.nodeByName = make(map[string]*NodeInfo, len(names))
		s.poolNode = map[poolKey]*NodeInfo{}
		for i, name := range names {
			ni := c.nodeInfo(s, c.nodes[name])
			s.Nodes[i], s.nodeByName[name] = ni, ni
		}
		c.nodeSetChanged = false
		clear(c.dirtyNodes)
		s.nodeObjs = nil
		return
	}
	for name := range s.touched {
		c.dirtyNodes[name] = struct{}{}
	}
	for name := range c.dirtyNodes {
		old := s.nodeByName[name]
		it := c.nodes[name]
		if old == nil || it == nil || it.node == nil {
			continue // not a node of the snapshot (yet)
		}
		for _, sl := range old.Slices {
			if k := (poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}); s.poolNode[k] == old {
				delete(s.poolNode, k)
			}
		}
		ni := c.nodeInfo(s, it)
		i := sort.Search(len(s.Nodes), func(i int) bool { return s.Nodes[i].Node.Name >= name })
		s.Nodes[i], s.nodeByName[name] = ni, ni
		if s.nodeObjs != nil && s.nodeObjs[i] != it.node {
			s.nodeObjs = nil
		}
	}
	clear(c.dirtyNodes)
}

// nodeInfo copies a node item for s, counting its devices s holds.
func (c *Cache) nodeInfo(s *Snapshot, it *nodeItem) *NodeInfo {
	ni := &NodeInfo{
		Node:        it.node,
		Allocatable: it.allocatable,
		Requested:   it.requested.Clone(),
		UsedPorts:   make(sets.Set[string], len(it.ports)),
		Slices:      sortedSlices(it.slices),
		capacity:    podgroup.NodeCapacityType(it.node),
	}
	for p := range it.ports {
		ni.UsedPorts.Insert(p)
	}
	ni.devices = countUnits(ni.Slices)
	for _, sl := range ni.Slices {
		s.poolNode[poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}] = ni
		ids := DevicesOf(sl)
		for i := range sl.Spec.Devices {
			if s.Allocated.Has(ids.ID(sl.Spec.Devices[i].Name)) {
				ni.holdUnit(unitOf(sl.Spec.Driver, sl.Spec.Pool.Name, &sl.Spec.Devices[i]))
			}
		}
	}
	return ni
}

func sortedSlices(m map[string]*resourcev1.ResourceSlice) []*resourcev1.ResourceSlice {
	if len(m) == 0 {
		return nil
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(m))
	for _, sl := range m {
		out = append(out, sl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Handlers for the informers (and the ResourceSlice tracker) that feed the
// cache.

// PodEvents feeds pod events to the cache.
func (c *Cache) PodEvents() toolscache.ResourceEventHandler {
	return handler(c.AddPod, c.DeletePod)
}

// NodeEvents feeds node events to the cache.
func (c *Cache) NodeEvents() toolscache.ResourceEventHandler {
	return handler(c.AddNode, c.DeleteNode)
}

// ClaimEvents feeds ResourceClaim events to the cache.
func (c *Cache) ClaimEvents() toolscache.ResourceEventHandler {
	return handler(c.AddClaim, c.DeleteClaim)
}

// ClassEvents feeds DeviceClass events to the cache.
func (c *Cache) ClassEvents() toolscache.ResourceEventHandler {
	return handler(c.AddClass, c.DeleteClass)
}

// SliceEvents feeds (patched) ResourceSlice events to the cache.
func (c *Cache) SliceEvents() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if sl, ok := obj.(*resourcev1.ResourceSlice); ok {
				c.AddSlice(sl)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*resourcev1.ResourceSlice)
			n, ok2 := newObj.(*resourcev1.ResourceSlice)
			if ok1 && ok2 {
				c.UpdateSlice(o, n)
			}
		},
		DeleteFunc: deleted(c.DeleteSlice),
	}
}

func handler[T any](set, del func(T)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				set(o)
			}
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				set(o)
			}
		},
		DeleteFunc: deleted(del),
	}
}

func deleted[T any](del func(T)) func(any) {
	return func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(T); ok {
			del(o)
		}
	}
}
