package snapshot

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/dynamic-resource-allocation/structured"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// NodeInfo is a node and what is already placed on it. Its fields are
// read-only outside this package: a cycle changes them only through the
// snapshot's methods (PlacePod, RemovePod, Reserve, …), which a cached
// snapshot (Cache) records so that the next update can undo them.
type NodeInfo struct {
	Node        *corev1.Node
	Allocatable Resources
	Requested   Resources
	// UsedPorts are host ports in use, as "protocol/ip/port".
	UsedPorts sets.Set[string]
	// Slices are the ResourceSlices local to this node.
	Slices []*resourcev1.ResourceSlice
	// devices counts the devices of Slices, a partitionable device (a
	// counter set and the devices consuming from it) once; used counts
	// those in use (unitUse: allocated devices per unit).
	devices, used int
	unitUse       map[unit]int
	// capacity is the node's capacity type, read from its labels once
	// (every placement filters every node by it).
	capacity podgroup.CapacityType
}

// CapacityType is the node's capacity type (podgroup.NodeCapacityType).
func (ni *NodeInfo) CapacityType() podgroup.CapacityType {
	if ni.capacity == "" {
		return podgroup.NodeCapacityType(ni.Node)
	}
	return ni.capacity
}

// FreeDevices is how many devices of the node's own slices are not in use,
// a partitionable device counting once, as in use while any of its
// partitions is (kept current by every change to the snapshot's
// allocations).
func (ni *NodeInfo) FreeDevices() int { return ni.devices - ni.used }

// Snapshot is the cluster state of one cycle.
type Snapshot struct {
	// Features are the gated behaviours every decision on the snapshot
	// follows (allocator features, pod requests, …).
	Features   features.Features
	Nodes      []*NodeInfo
	nodeByName map[string]*NodeInfo
	// GlobalSlices are slices not local to one node (allNodes or a node selector).
	GlobalSlices []*resourcev1.ResourceSlice
	Classes      map[string]*resourcev1.DeviceClass
	// Claims by namespace/name, with allocations this cycle made applied.
	Claims map[types.NamespacedName]*resourcev1.ResourceClaim
	// Allocated are all devices allocated to any claim for its exclusive
	// use. Read it; change it only through the snapshot's methods, which
	// keep per-node counts.
	Allocated sets.Set[structured.DeviceID]
	// Shared are the allocations of devices that allow several
	// (allowMultipleAllocations: each has a share ID), and Consumed what
	// they consume of each device's capacity (consumable capacity).
	Shared   sets.Set[structured.SharedDeviceID]
	Consumed structured.ConsumedCapacityCollection
	// poolNode maps a node-local pool ("driver/pool") to its node.
	poolNode map[poolKey]*NodeInfo
	// Constraints, when set, are told of every pod the snapshot gains or
	// loses and filter pods by the pods placed (internal/kubefilter).
	Constraints PodConstraints
	// extended resolves extended resource names to DeviceClasses (built
	// on first use from Classes).
	extended *extendedresourcecache.ExtendedResourceCache
	// tracked is set on the Cache's long-lived snapshot: what a cycle
	// changes is recorded (journal: the undo of each change to Claims,
	// Allocated, Shared and Consumed; touched: the nodes changed) so the
	// next Cache.Update can return it to the cache's state.
	tracked bool
	journal []func()
	touched map[string]bool
	// ReservedFor is the hash of the unit the snapshot is decided for
	// (podgroup.UnitHash): nodes tainted reserved-for it are its, nodes
	// reserved for another unit are not (empty: every reservation bars).
	ReservedFor string
	// nodeObjs caches NodeObjects (a tracked snapshot drops it when nodes
	// change).
	nodeObjs []*corev1.Node
	// requests, on the Cache's snapshot, are the pod requests it computed
	// once per pod object (Cache.requestsOf).
	requests func(*corev1.Pod) (Resources, bool)
}

// Requests is PodRequests(p, s.Features): remembered by the cache that
// serves the snapshot, which computed it at p's event, else computed now
// (a gang of 10,000 reads its members' requests several times a decision,
// and computing them is most of a decision's cost). The result is the
// caller's to change.
func (s *Snapshot) Requests(p *corev1.Pod) Resources {
	if s.requests != nil {
		if r, ok := s.requests(p); ok {
			return r
		}
	}
	return PodRequests(p, s.Features)
}

// PodConstraints are the filters whose answer depends on the other pods of
// the cluster: kube-scheduler's InterPodAffinity and PodTopologySpread.
type PodConstraints interface {
	// AddPod records that p holds node (bound, assumed or reserved).
	AddPod(p *corev1.Pod, node string)
	// RemovePod records that p no longer holds its node.
	RemovePod(p *corev1.Pod)
	// Prepare computes what checking p needs from the pods held now; nil
	// when nothing constrains p.
	Prepare(ctx context.Context, p *corev1.Pod) (PodCheck, error)
}

// PodCheck filters nodes for one pod, as of its Prepare.
type PodCheck interface {
	// Check returns "" when the pod may go to node, else the reason.
	Check(ctx context.Context, node string) (string, error)
	// Reserve holds what the pod needs on node once it is placed there
	// (its volumes); nil when it needs nothing.
	Reserve(ctx context.Context, node string) (Reservation, error)
}

// Reservation is what a placed pod holds until it is bound.
type Reservation interface {
	// PreBind writes it (volume bindings) before the pod is bound.
	PreBind(ctx context.Context) error
	// Unreserve releases it when the placement is given up.
	Unreserve(ctx context.Context)
}

// PodAdded tells the constraints that p now holds node.
func (s *Snapshot) PodAdded(p *corev1.Pod, node string) {
	if s.Constraints != nil {
		s.Constraints.AddPod(p, node)
	}
}

// PodRemoved tells the constraints that p no longer holds its node.
func (s *Snapshot) PodRemoved(p *corev1.Pod) {
	if s.Constraints != nil {
		s.Constraints.RemovePod(p)
	}
}

type poolKey struct{ driver, pool string }

// Input is what a snapshot is built from. Pods must include every pod bound
// (or assumed bound) to a node, by any scheduler; pods that are terminal are
// ignored.
type Input struct {
	// Features are what the snapshot's decisions follow (features.Default
	// for kube-scheduler 1.37's).
	Features features.Features
	Nodes    []*corev1.Node
	Pods     []*corev1.Pod
	Slices   []*resourcev1.ResourceSlice
	Classes  []*resourcev1.DeviceClass
	Claims   []*resourcev1.ResourceClaim
}

// New builds a snapshot. It does not retain or modify the input objects'
// contents except by pointer (claims are replaced, never mutated, on Assume).
func New(in Input) *Snapshot {
	s := &Snapshot{
		Features:   in.Features,
		nodeByName: make(map[string]*NodeInfo, len(in.Nodes)),
		Classes:    make(map[string]*resourcev1.DeviceClass, len(in.Classes)),
		Claims:     make(map[types.NamespacedName]*resourcev1.ResourceClaim, len(in.Claims)),
		Allocated:  sets.New[structured.DeviceID](),
		Shared:     sets.New[structured.SharedDeviceID](),
		Consumed:   structured.NewConsumedCapacityCollection(),
		poolNode:   map[poolKey]*NodeInfo{},
	}
	nodes := append([]*corev1.Node(nil), in.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		ni := &NodeInfo{Node: n, Allocatable: FromList(n.Status.Allocatable), UsedPorts: sets.New[string](), capacity: podgroup.NodeCapacityType(n)}
		s.Nodes = append(s.Nodes, ni)
		s.nodeByName[n.Name] = ni
	}
	for _, p := range in.Pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ni := s.nodeByName[p.Spec.NodeName]; ni != nil {
			ni.AddPod(p, s.Features)
		}
	}
	for _, sl := range in.Slices {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
			if ni := s.nodeByName[*sl.Spec.NodeName]; ni != nil {
				ni.Slices = append(ni.Slices, sl)
				s.poolNode[poolKey{sl.Spec.Driver, sl.Spec.Pool.Name}] = ni
			}
			continue
		}
		s.GlobalSlices = append(s.GlobalSlices, sl)
	}
	for _, ni := range s.Nodes {
		ni.devices = countUnits(ni.Slices)
	}
	for _, c := range in.Classes {
		s.Classes[c.Name] = c
	}
	for _, c := range in.Claims {
		s.Claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
		s.HoldClaim(c)
	}
	return s
}

// NodeObjects are the snapshot's nodes, in name order.
func (s *Snapshot) NodeObjects() []*corev1.Node {
	if s.nodeObjs == nil {
		s.nodeObjs = make([]*corev1.Node, len(s.Nodes))
		for i, ni := range s.Nodes {
			s.nodeObjs[i] = ni.Node
		}
	}
	return s.nodeObjs
}

// Node returns the NodeInfo of a node, or nil.
func (s *Snapshot) Node(name string) *NodeInfo { return s.nodeByName[name] }

// HoldClaim marks what an allocated claim holds as in use: its devices
// allocated for exclusive use, and its shares of devices that allow several
// allocations with the capacity they consume. Results with admin access
// hold nothing (kube-scheduler does not count them either).
func (s *Snapshot) HoldClaim(c *resourcev1.ResourceClaim) {
	s.holdClaim(c, ClaimDevices(c))
}

// holdClaim is HoldClaim with the claim's ClaimDevices already made.
func (s *Snapshot) holdClaim(c *resourcev1.ResourceClaim, devices []structured.DeviceID) {
	s.Allocate(devices...)
	for _, r := range sharedResults(c) {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		s.insertShared(structured.MakeSharedDeviceID(id, r.ShareID))
		if r.ConsumedCapacity != nil {
			s.consume(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity), true)
		}
	}
}

// ReleaseClaim undoes HoldClaim.
func (s *Snapshot) ReleaseClaim(c *resourcev1.ResourceClaim) {
	s.releaseClaim(c, ClaimDevices(c))
}

// releaseClaim is ReleaseClaim with the claim's ClaimDevices already made.
func (s *Snapshot) releaseClaim(c *resourcev1.ResourceClaim, devices []structured.DeviceID) {
	s.Release(devices...)
	for _, r := range sharedResults(c) {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		s.deleteShared(structured.MakeSharedDeviceID(id, r.ShareID))
		if r.ConsumedCapacity != nil {
			s.consume(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity), false)
		}
	}
}

func sharedResults(c *resourcev1.ResourceClaim) []resourcev1.DeviceRequestAllocationResult {
	if c == nil || c.Status.Allocation == nil {
		return nil
	}
	var out []resourcev1.DeviceRequestAllocationResult
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.ShareID != nil && !ptr.Deref(r.AdminAccess, false) {
			out = append(out, r)
		}
	}
	return out
}

// Allocate marks devices allocated.
func (s *Snapshot) Allocate(ids ...structured.DeviceID) {
	for _, id := range ids {
		if s.Allocated.Has(id) {
			continue
		}
		s.Allocated.Insert(id)
		ni := s.poolNode[poolKey{id.Driver.String(), id.Pool.String()}]
		ni.hold(id)
		if s.tracked {
			s.touch(ni)
			s.journal = append(s.journal, func() { s.Allocated.Delete(id) })
		}
	}
}

// Release marks devices free.
func (s *Snapshot) Release(ids ...structured.DeviceID) {
	for _, id := range ids {
		if !s.Allocated.Has(id) {
			continue
		}
		s.Allocated.Delete(id)
		ni := s.poolNode[poolKey{id.Driver.String(), id.Pool.String()}]
		ni.unhold(id)
		if s.tracked {
			s.touch(ni)
			s.journal = append(s.journal, func() { s.Allocated.Insert(id) })
		}
	}
}

func (s *Snapshot) insertShared(id structured.SharedDeviceID) {
	if s.Shared.Has(id) {
		return
	}
	s.Shared.Insert(id)
	if s.tracked {
		s.journal = append(s.journal, func() { s.Shared.Delete(id) })
	}
}

func (s *Snapshot) deleteShared(id structured.SharedDeviceID) {
	if !s.Shared.Has(id) {
		return
	}
	s.Shared.Delete(id)
	if s.tracked {
		s.journal = append(s.journal, func() { s.Shared.Insert(id) })
	}
}

// consume adds (or, add false, takes back) capacity consumed of a device.
func (s *Snapshot) consume(c structured.DeviceConsumedCapacity, add bool) {
	if add {
		s.Consumed.Insert(c)
	} else {
		s.Consumed.Remove(c)
	}
	if s.tracked {
		s.journal = append(s.journal, func() {
			if add {
				s.Consumed.Remove(c)
			} else {
				s.Consumed.Insert(c)
			}
		})
	}
}

// touch records that a cycle changed ni (a tracked snapshot copies it
// again from the cache on its next update).
func (s *Snapshot) touch(ni *NodeInfo) {
	if s.tracked && ni != nil {
		s.touched[ni.Node.Name] = true
	}
}

// PlacePod records a pod placed on ni this cycle: its requests and host
// ports (as PodRequests and HostPorts give them). UnplacePod undoes it.
func (s *Snapshot) PlacePod(ni *NodeInfo, p *corev1.Pod, req Resources, ports []string) {
	s.touch(ni)
	ni.Requested.Add(req)
	for _, port := range ports {
		ni.UsedPorts.Insert(port)
	}
	s.PodAdded(p, ni.Node.Name)
}

// UnplacePod undoes PlacePod.
func (s *Snapshot) UnplacePod(ni *NodeInfo, p *corev1.Pod, req Resources, ports []string) {
	s.touch(ni)
	s.PodRemoved(p)
	ni.Requested.Sub(req)
	for _, port := range ports {
		ni.UsedPorts.Delete(port)
	}
}

// AddPod records a pod as placed on the node.
func (ni *NodeInfo) AddPod(p *corev1.Pod, f features.Features) {
	ni.Requested.Add(PodRequests(p, f))
	for _, port := range HostPorts(p) {
		ni.UsedPorts.Insert(port)
	}
}

// HostPorts are the host ports a pod uses, as "protocol/ip/port": those of
// its containers and of its sidecars (restartable init containers), as
// kube-scheduler's NodePorts counts them.
func HostPorts(p *corev1.Pod) []string {
	var out []string
	for _, cp := range schedutil.GetHostPorts(p) {
		ip := cp.HostIP
		if ip == "" {
			ip = "0.0.0.0"
		}
		proto := cp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out = append(out, string(proto)+"/"+ip+"/"+itoa(cp.HostPort))
	}
	return out
}

// PortConflict reports whether the port "proto/ip/port" clashes with one in use
// (same protocol and port, and the same IP or either is 0.0.0.0).
func (ni *NodeInfo) PortConflict(port string) bool {
	if ni.UsedPorts.Has(port) {
		return true
	}
	proto, ip, num := splitPort(port)
	for used := range ni.UsedPorts {
		up, uip, unum := splitPort(used)
		if up == proto && unum == num && (uip == "0.0.0.0" || ip == "0.0.0.0") {
			return true
		}
	}
	return false
}

// AssumeClaim records an allocation made this cycle: the claim is replaced
// by a copy with the allocation and its devices count as allocated.
func (s *Snapshot) AssumeClaim(c *resourcev1.ResourceClaim) {
	s.setClaim(types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, c)
	s.HoldClaim(c)
}

// setClaim sets (c != nil) or deletes a claim of Claims, recording the undo
// in a tracked snapshot.
func (s *Snapshot) setClaim(key types.NamespacedName, c *resourcev1.ResourceClaim) {
	if s.tracked {
		old, had := s.Claims[key]
		s.journal = append(s.journal, func() {
			if had {
				s.Claims[key] = old
			} else {
				delete(s.Claims, key)
			}
		})
	}
	if c == nil {
		delete(s.Claims, key)
		return
	}
	s.Claims[key] = c
}

// ForgetClaim undoes AssumeClaim of a claim the snapshot did not have
// before (the claim created for a pod's extended resources).
func (s *Snapshot) ForgetClaim(assumed *resourcev1.ResourceClaim) {
	s.setClaim(types.NamespacedName{Namespace: assumed.Namespace, Name: assumed.Name}, nil)
	s.ReleaseClaim(assumed)
}

// UnassumeClaim undoes AssumeClaim: old is restored and the devices that
// assumed allocated are free again.
func (s *Snapshot) UnassumeClaim(old, assumed *resourcev1.ResourceClaim) {
	s.setClaim(types.NamespacedName{Namespace: old.Namespace, Name: old.Name}, old)
	s.ReleaseClaim(assumed)
}

// RemovePod takes what a placed pod uses off its node (req and ports as
// PodRequests and HostPorts give them, passed in so a what-if that moves
// many pods computes them once); RestorePod puts it back.
func (s *Snapshot) RemovePod(p *corev1.Pod, req Resources, ports []string) {
	ni := s.nodeByName[p.Spec.NodeName]
	if ni == nil {
		return
	}
	s.touch(ni)
	s.PodRemoved(p)
	ni.Requested.Sub(req)
	for _, port := range ports {
		ni.UsedPorts.Delete(port)
	}
}

// RestorePod undoes RemovePod.
func (s *Snapshot) RestorePod(p *corev1.Pod, req Resources, ports []string) {
	ni := s.nodeByName[p.Spec.NodeName]
	if ni == nil {
		return
	}
	s.touch(ni)
	s.PodAdded(p, p.Spec.NodeName)
	ni.Requested.Add(req)
	for _, port := range ports {
		ni.UsedPorts.Insert(port)
	}
}

// Reserve holds capacity for a pod that is not bound yet (a nomination):
// its requests and host ports on node, and what the claims allocated for it
// hold.
func (s *Snapshot) Reserve(node string, p *corev1.Pod, claims []*resourcev1.ResourceClaim) {
	if ni := s.nodeByName[node]; ni != nil {
		s.touch(ni)
		ni.AddPod(p, s.Features)
		s.PodAdded(p, node)
	}
	for _, c := range claims {
		s.HoldClaim(c)
	}
}

// SliceDevices makes the IDs of one slice's devices, its driver and pool
// interned once instead of once per device (structured.MakeDeviceID).
type SliceDevices struct{ driver, pool draapi.UniqueString }

// DevicesOf is the SliceDevices of sl.
func DevicesOf(sl *resourcev1.ResourceSlice) SliceDevices {
	return SliceDevices{draapi.MakeUniqueString(sl.Spec.Driver), draapi.MakeUniqueString(sl.Spec.Pool.Name)}
}

// ID is the ID of the slice's device name.
func (d SliceDevices) ID(name string) structured.DeviceID {
	return structured.DeviceID{Driver: d.driver, Pool: d.pool, Device: draapi.MakeUniqueString(name)}
}

// ClaimDevices are the devices an allocated claim holds for its exclusive
// use (not shares of devices that allow several allocations, not admin
// access).
func ClaimDevices(c *resourcev1.ResourceClaim) []structured.DeviceID {
	if c == nil || c.Status.Allocation == nil {
		return nil
	}
	out := make([]structured.DeviceID, 0, len(c.Status.Allocation.Devices.Results))
	// ids interns the driver and pool of the last result made: most results share them.
	var ids SliceDevices
	var driver, pool string
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.ShareID != nil || ptr.Deref(r.AdminAccess, false) {
			continue
		}
		if len(out) == 0 || r.Driver != driver || r.Pool != pool {
			driver, pool = r.Driver, r.Pool
			ids = SliceDevices{draapi.MakeUniqueString(driver), draapi.MakeUniqueString(pool)}
		}
		out = append(out, ids.ID(r.Device))
	}
	return out
}

// PodClaimNames are the names of every claim a pod uses: its
// spec.resourceClaims as resolved so far, and the claim kube-scheduler (or
// Lockstep) created for its extended resources backed by DRA
// (status.extendedResourceClaimStatus).
func PodClaimNames(p *corev1.Pod) []string {
	var out []string
	for _, pc := range p.Spec.ResourceClaims {
		if name, ok := ClaimName(p, pc); ok {
			out = append(out, name)
		}
	}
	if st := p.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		out = append(out, st.ResourceClaimName)
	}
	return out
}

// ClaimName resolves a pod claim: a named claim, or the one generated from a
// template as recorded in pod.status.resourceClaimStatuses.
func ClaimName(p *corev1.Pod, pc corev1.PodResourceClaim) (string, bool) {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName, true
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.Name == pc.Name && st.ResourceClaimName != nil {
			return *st.ResourceClaimName, true
		}
	}
	return "", false
}
