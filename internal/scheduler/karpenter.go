package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/provision"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// Pod condition reasons of a gang whose nodes Lockstep asks Karpenter for
// (--karpenter with instance types): never Unschedulable, the reason
// Karpenter provisions for pod by pod.
const (
	// PodReasonWaitingForNodes: a request for the gang's missing nodes
	// stands.
	PodReasonWaitingForNodes = "WaitingForNodes"
	// PodReasonNoCapacity: no offering of any NodePool would make the gang
	// fit (a NodePool's limit, an instance type too small…); the message
	// says what stops each.
	PodReasonNoCapacity = "NoCapacity"
)

const (
	// provisionPoll is how often a unit waiting for its nodes is looked at
	// again without an event (NodeClaim and node events wake it sooner).
	provisionPoll = 5 * time.Second
	// karpenterDiscoveryInterval is how often, with --karpenter and until
	// Karpenter's API is served, discovery is asked whether it is.
	karpenterDiscoveryInterval = 10 * time.Second
	// unseenGrace is how long the NodeClaims of a request this process
	// made may stay unseen by its informer before they count as deleted.
	unseenGrace = time.Minute
	// unavailableTTL is how long an offering Karpenter could not launch is
	// not asked for by any unit (Karpenter's own cache keeps one 3 minutes).
	unavailableTTL = 3 * time.Minute
	// failedOfferingTTL is how long an offering whose launch failed is not
	// tried again for the same unit (Karpenter keeps its own unavailable
	// offerings for 3 minutes).
	failedOfferingTTL = 10 * time.Minute
)

// provisioner asks Karpenter for the nodes a gang is missing, as one unit
// (package provision), and follows its requests through the NodeClaims
// themselves: what a request is, how far it got and whether it failed are
// read from the API, so a restarted scheduler picks up where it was.
type provisioner struct {
	now     func() time.Time
	types   []provision.InstanceType
	timeout time.Duration
	pools   cache.GenericLister
	claims  cache.GenericLister

	mu sync.Mutex
	// excluded are, per unit, the offerings whose launch failed, until
	// when they are not tried again; failures say what happened, for the
	// unit's messages.
	excluded map[string]map[string]time.Time
	failures map[string][]string
	// unavailable are offerings Karpenter could not launch (it deleted
	// their NodeClaims), until when no unit asks for them: as Karpenter's
	// own unavailable-offerings cache, a zone that ran out of an instance
	// type is not where the next gang goes.
	unavailable map[string]time.Time
	// inflight are the requests this process made that have not ended, by
	// unit: a request whose NodeClaims Karpenter deleted every one of is
	// known as failed only from here.
	inflight map[string]*request
}

// karpenterServed reports whether Karpenter's NodePools and NodeClaims are
// served.
func karpenterServed(d discovery.DiscoveryInterface) (bool, error) {
	for _, r := range []string{provision.NodePoolResource.Resource, provision.NodeClaimResource.Resource} {
		ok, err := apidiscovery.Serves(d, provision.NodeClaimResource.GroupVersion().String(), r)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// setupKarpenter watches NodePools and NodeClaims when --karpenter is on,
// instance types are known and Karpenter's API is served; a change to a
// NodeClaim Lockstep made wakes the unit it was made for. Karpenter
// installed after Lockstep is picked up by enableKarpenter.
func (s *Scheduler) setupKarpenter() error {
	if !s.opts.Karpenter || len(s.opts.KarpenterInstanceTypes) == 0 {
		return nil
	}
	served, err := karpenterServed(s.client.Discovery())
	if err != nil {
		return err
	}
	s.metrics.KindServed.WithLabelValues(provision.NodeClaimResource.GroupResource().String()).Set(served01(served))
	if !served {
		klog.Background().Info("Karpenter's API is not served yet: gangs' nodes are asked for once it is (discovery is asked every 10s)", "resource", provision.NodeClaimResource.String())
		return nil
	}
	return s.watchKarpenter()
}

func (s *Scheduler) watchKarpenter() error {
	pools := s.dynFactor.ForResource(provision.NodePoolResource)
	claims := s.dynFactor.ForResource(provision.NodeClaimResource)
	wake := func(obj any) {
		if u, ok := unstructuredOf(obj); ok {
			if unit := u.GetAnnotations()[provision.UnitAnnotation]; unit != "" && u.GetLabels()[provision.CreatedByLabel] == provision.CreatedBy {
				if k, ok := queue.ParseKey(unit); ok {
					s.queue.Add(k)
				}
			}
		}
	}
	reg, err := claims.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: wake, UpdateFunc: func(_, n any) { wake(n) }, DeleteFunc: wake})
	if err != nil {
		return err
	}
	// A NodePool added or changed (its limits raised, an instance type
	// allowed) may help a unit no offering helped.
	poolReg, err := pools.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.queue.CapacityChanged() },
		UpdateFunc: func(o, n any) { s.onNodePoolUpdate(o, n) },
	})
	if err != nil {
		return err
	}
	s.handlers = append(s.handlers, reg.HasSynced, poolReg.HasSynced)
	p := &provisioner{now: s.clock.Now, types: s.opts.KarpenterInstanceTypes, timeout: s.opts.ProvisionTimeout, pools: pools.Lister(), claims: claims.Lister(),
		excluded: map[string]map[string]time.Time{}, failures: map[string][]string{}, inflight: map[string]*request{}, unavailable: map[string]time.Time{}}
	if p.timeout <= 0 {
		p.timeout = DefaultProvisionTimeout
	}
	s.provisioner.Store(p)
	return nil
}

// enableKarpenter starts asking Karpenter for nodes once its API is served
// (Karpenter installed after Lockstep): no restart. Units left
// unschedulable meanwhile are looked at again.
func (s *Scheduler) enableKarpenter(ctx context.Context, interval time.Duration) {
	if s.waitServed(ctx, interval, karpenterServed) {
		s.enableProvisioning(ctx)
	}
}

func (s *Scheduler) enableProvisioning(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if err := s.watchKarpenter(); err != nil {
		logger.Error(err, "Watching Karpenter")
		return
	}
	s.dynFactor.Start(ctx.Done())
	s.dynFactor.WaitForCacheSync(ctx.Done())
	s.metrics.KindServed.WithLabelValues(provision.NodeClaimResource.GroupResource().String()).Set(1)
	logger.Info("Karpenter's API is served now: gangs' missing nodes are asked for", "resource", provision.NodeClaimResource.String())
	s.queue.CapacityChanged()
}

// onNodePoolUpdate wakes the units when a NodePool's spec changes (not
// its status: Karpenter rewrites status.resources with every node).
func (s *Scheduler) onNodePoolUpdate(o, n any) {
	ou, ok1 := unstructuredOf(o)
	nu, ok2 := unstructuredOf(n)
	if ok1 && ok2 && ou.GetGeneration() == nu.GetGeneration() {
		return
	}
	s.queue.CapacityChanged()
}

// DefaultProvisionTimeout is how long a request's nodes have to become
// ready before they are released (--karpenter-provision-timeout).
const DefaultProvisionTimeout = 10 * time.Minute

func unstructuredOf(obj any) (*unstructured.Unstructured, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// request is a request of a unit as its NodeClaims show it.
type request struct {
	id      string
	claims  []*unstructured.Unstructured
	want    int
	created time.Time
	// offering is the offering's key (provision.Offering.Key).
	offering string
	// seen: the informer has shown its NodeClaims (a request this
	// process made); unseen: not yet, it was made a moment ago.
	seen, unseen bool
	// done: the unit bound; the claims no longer carry do-not-disrupt.
	done bool
}

// standing is the unit's latest request that has not ended (nil: none).
func (p *provisioner) standing(unit string) (*request, error) {
	objs, err := p.claims.List(labels.SelectorFromSet(labels.Set{provision.UnitLabel: provision.UnitHash(unit), provision.CreatedByLabel: provision.CreatedBy}))
	if err != nil {
		return nil, err
	}
	byID := map[string]*request{}
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		if u.GetAnnotations()[provision.UnitAnnotation] != unit {
			continue // a hash collision
		}
		id := u.GetLabels()[provision.RequestLabel]
		r := byID[id]
		if r == nil {
			r = &request{id: id, created: u.GetCreationTimestamp().Time}
			r.want, _ = strconv.Atoi(u.GetAnnotations()[provision.CountAnnotation])
			byID[id] = r
		}
		r.claims = append(r.claims, u)
		if u.GetCreationTimestamp().Time.Before(r.created) {
			r.created = u.GetCreationTimestamp().Time
		}
		if u.GetAnnotations()[provision.DoNotDisruptAnnotation] != "true" {
			r.done = true
		}
	}
	var latest *request
	for _, r := range byID {
		if r.done {
			continue
		}
		r.offering = offeringKey(r.claims)
		if latest == nil || r.created.After(latest.created) || r.created.Equal(latest.created) && r.id > latest.id {
			latest = r
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	mine := p.inflight[unit]
	if mine != nil && byID[mine.id] != nil {
		mine.seen = true
	}
	switch {
	case mine != nil && byID[mine.id] == nil && (mine.seen || p.now().Sub(mine.created) > unseenGrace):
		// Every NodeClaim of the request this process made is gone (the
		// informer showed them, or has had ample time to).
		return &request{id: mine.id, want: mine.want, created: mine.created, offering: mine.offering}, nil
	case mine != nil && byID[mine.id] == nil:
		// Created a moment ago; the informer has not shown them yet.
		return &request{id: mine.id, want: mine.want, created: mine.created, offering: mine.offering, unseen: true}, nil
	case mine != nil && latest != nil && latest.id == mine.id:
		// Timed on the scheduler's own clock.
		latest.created = mine.created
	}
	return latest, nil
}

// claimState is how far one NodeClaim got: its node ready, or failed.
func claimState(u *unstructured.Unstructured) (ready bool, failed string) {
	if u.GetDeletionTimestamp() != nil {
		return false, "NodeClaim " + u.GetName() + " is being deleted"
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		switch {
		case typ == "Launched" && st == "False":
			return false, fmt.Sprintf("NodeClaim %s did not launch: %s %s", u.GetName(), reason, msg)
		case typ == "Initialized" && st == "True":
			ready = true
		}
	}
	return ready, ""
}

// provisionOutcome is what the provisioner did for a unit that does not
// fit: the pods' reason and message.
type provisionOutcome struct {
	reason, message string
}

// provision is called for a gang the nodes that exist cannot place and no
// preemption makes room for: it follows the unit's standing request
// (released whole if one of its launches failed or it timed out), or asks
// for the smallest set of nodes that makes the unit fit. ok is false when
// the unit is not Lockstep's to provision (a lone pod: Karpenter's as
// usual).
func (s *Scheduler) provision(ctx context.Context, u *unit, prio int32) (provisionOutcome, bool) {
	p := s.provisioner.Load()
	if p == nil || !u.multiMember() {
		return provisionOutcome{}, false
	}
	logger := klog.FromContext(ctx)
	unit := u.key.String()
	now := s.clock.Now()
	r, err := p.standing(unit)
	if err != nil {
		return provisionOutcome{PodReasonWaitingForNodes, "reading its NodeClaims: " + err.Error()}, true
	}
	if r != nil {
		ready, failed, noCapacity := 0, "", false
		for _, c := range r.claims {
			ok, why := claimState(c)
			if ok {
				ready++
			}
			if why != "" && failed == "" {
				// Karpenter deletes a NodeClaim it cannot launch.
				failed, noCapacity = why, c.GetDeletionTimestamp() != nil
			}
		}
		if failed == "" && len(r.claims) < r.want && !r.unseen {
			noCapacity = true
			failed = fmt.Sprintf("Karpenter deleted %d of its %d NodeClaims before they launched (insufficient capacity, or its node class not ready: see the NodeClaims' events)", r.want-len(r.claims), r.want)
		}
		if failed == "" && now.Sub(r.created) > p.timeout {
			failed = fmt.Sprintf("%d of %d nodes ready after %s (--karpenter-provision-timeout)", ready, r.want, p.timeout)
		}
		offering := provision.DescribeKey(r.offering)
		if failed == "" {
			return provisionOutcome{PodReasonWaitingForNodes, fmt.Sprintf("waiting for the %s Lockstep asked Karpenter for (%s): %d ready", provision.Nodes(r.want), offering, ready)}, true
		}
		// All or nothing: every node of the set goes, none is orphaned.
		s.releaseRequest(ctx, r)
		msg := fmt.Sprintf("the request for %s failed: %s; its nodes were released", offering, failed)
		logger.Info("Provisioning failed; nodes released", "unit", unit, "request", r.id, "reason", failed)
		p.fail(unit, r.offering, msg, now, noCapacity)
		s.recorder.Eventf(u.eventObject(), nil, corev1.EventTypeWarning, "ProvisioningFailed", "Provisioning", "%s", msg)
	}
	excluded := p.excludedFor(unit, now)
	pools, err := p.nodePools()
	if err != nil {
		return provisionOutcome{PodReasonNoCapacity, err.Error()}, true
	}
	res := provision.Plan(provision.Offerings(pools, p.types, excluded), u.pendingCount(), provision.FitsWith(ctx, s.state, u.key.String(), u.tree, prio))
	history := p.history(unit)
	if res.Request == nil {
		return provisionOutcome{PodReasonNoCapacity, "no nodes fit it and no NodePool can add nodes that would: " + strings.Join(append(res.Why, history...), "; ")}, true
	}
	attempt := p.nextAttempt(unit)
	id := provision.RequestID(unit, attempt)
	ncs, err := provision.NodeClaims(*res.Request, unit, id)
	if err != nil {
		return provisionOutcome{PodReasonNoCapacity, err.Error()}, true
	}
	created := 0
	for _, nc := range ncs {
		if _, err := s.dynamic.Resource(provision.NodeClaimResource).Create(ctx, nc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			logger.Error(err, "Creating a NodeClaim; releasing the request", "unit", unit, "nodeClaim", nc.GetName())
			s.releaseRequest(ctx, &request{id: id, claims: ncs})
			return provisionOutcome{PodReasonWaitingForNodes, "creating NodeClaims failed: " + err.Error()}, true
		}
		created++
	}
	p.mu.Lock()
	p.inflight[unit] = &request{id: id, want: len(ncs), created: now, offering: res.Request.Offering.Key()}
	p.mu.Unlock()
	msg := fmt.Sprintf("asked Karpenter for %s (request %s)", res.Request, id)
	logger.Info("Provisioning nodes for a unit", "unit", unit, "request", id, "nodes", res.Request.Count, "offering", res.Request.Offering.Key())
	s.recorder.Eventf(u.eventObject(), nil, corev1.EventTypeNormal, "Provisioning", "Provisioning", "%s", msg)
	if len(history) > 0 {
		msg += "; " + strings.Join(history, "; ")
	}
	return provisionOutcome{PodReasonWaitingForNodes, msg}, true
}

// releaseRequest deletes the NodeClaims of a request that Lockstep made.
//
// A NodeClaim whose node already runs pods (another unit took it while
// this one waited) is not deleted — that would drain them — but lets go
// of do-not-disrupt and its reservation: it is any node again.
func (s *Scheduler) releaseRequest(ctx context.Context, r *request) {
	logger := klog.FromContext(ctx)
	busy := s.busyNodes()
	for _, c := range r.claims {
		if c.GetLabels()[provision.CreatedByLabel] != provision.CreatedBy {
			continue
		}
		if node, _, _ := unstructured.NestedString(c.Object, "status", "nodeName"); node != "" && busy[node] {
			logger.Info("Keeping a released NodeClaim whose node runs pods; lifting its do-not-disrupt", "nodeClaim", c.GetName(), "node", node)
			s.releaseNamed(ctx, s.liftDoNotDisrupt(ctx, c))
			continue
		}
		err := s.dynamic.Resource(provision.NodeClaimResource).Delete(ctx, c.GetName(), metav1.DeleteOptions{Preconditions: uidPrecondition(c.GetUID())})
		if err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Releasing a NodeClaim", "nodeClaim", c.GetName())
		}
	}
}

// busyNodes are the nodes pods are bound to (not ended), from the cache.
func (s *Scheduler) busyNodes() map[string]bool {
	pods, err := s.listers.pods.List(labels.Everything())
	out := map[string]bool{}
	if err != nil {
		return out
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out[p.Spec.NodeName] = true
		}
	}
	return out
}

// liftPatch removes karpenter.sh/do-not-disrupt (a merge patch).
var liftPatch = []byte(`{"metadata":{"annotations":{"` + provision.DoNotDisruptAnnotation + `":null}}}`)

// liftDoNotDisrupt removes karpenter.sh/do-not-disrupt from a NodeClaim of
// Lockstep's, and returns the name of its node ("" if it has none yet).
func (s *Scheduler) liftDoNotDisrupt(ctx context.Context, c *unstructured.Unstructured) string {
	if _, err := s.dynamic.Resource(provision.NodeClaimResource).Patch(ctx, c.GetName(), types.MergePatchType, liftPatch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Lifting do-not-disrupt", "nodeClaim", c.GetName())
	}
	name, _, _ := unstructured.NestedString(c.Object, "status", "nodeName")
	return name
}

// releaseNamed releases the named node (releaseNode) as the cache shows it.
func (s *Scheduler) releaseNamed(ctx context.Context, name string) {
	if n, err := s.factory.Core().V1().Nodes().Lister().Get(name); err == nil {
		s.releaseNode(ctx, n, true)
	}
}

// releaseNode lets other pods and Karpenter have a node Lockstep asked for:
// it removes the reserved-for taint and, with annotation, the
// do-not-disrupt its NodeClaim gave it. Only nodes Karpenter made for
// Lockstep (labelled created-by lockstep, as their NodeClaims) are
// touched. The JSON patch tests what it removes, so a stale cache fails it
// rather than removing another taint (the sweep tries again).
func (s *Scheduler) releaseNode(ctx context.Context, n *corev1.Node, annotation bool) {
	if n.Labels[provision.CreatedByLabel] != provision.CreatedBy {
		return
	}
	var ops []map[string]any
	if _, ok := n.Annotations[provision.DoNotDisruptAnnotation]; ok && annotation {
		ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/annotations/" + strings.ReplaceAll(provision.DoNotDisruptAnnotation, "/", "~1")})
	}
	for i := len(n.Spec.Taints) - 1; i >= 0; i-- {
		if t := n.Spec.Taints[i]; t.Key == v1beta1.ReservedForTaint {
			path := fmt.Sprintf("/spec/taints/%d", i)
			ops = append(ops, map[string]any{"op": "test", "path": path + "/key", "value": t.Key}, map[string]any{"op": "remove", "path": path})
		}
	}
	if len(ops) == 0 {
		return
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return
	}
	if _, err := s.client.CoreV1().Nodes().Patch(ctx, n.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(2).Info("Releasing a node failed; the sweep tries again", "node", n.Name, "err", err)
		return
	}
	klog.FromContext(ctx).V(2).Info("Released a node", "node", n.Name, "unit", n.Annotations[provision.UnitAnnotation])
}

func uidPrecondition(uid types.UID) *metav1.Preconditions {
	if uid == "" {
		return nil
	}
	return &metav1.Preconditions{UID: &uid}
}

// finishProvisioning ends the unit's standing request once it is bound:
// its NodeClaims and nodes lose do-not-disrupt (the gang's pods carry
// their own while they run, so Karpenter may take the nodes once the gang
// ends).
func (s *Scheduler) finishProvisioning(ctx context.Context, u *unit) {
	s.finishRequest(ctx, u.key.String())
}

func (s *Scheduler) finishRequest(ctx context.Context, unit string) {
	p := s.provisioner.Load()
	if p == nil {
		return
	}
	r, err := p.standing(unit)
	if err != nil || r == nil {
		return
	}
	nodes := sets.New[string]()
	for _, c := range r.claims {
		if n := s.liftDoNotDisrupt(ctx, c); n != "" {
			nodes.Insert(n)
		}
	}
	// A NodeClaim's status may not name its node in the cache yet; the
	// node carries the NodeClaim's annotations (Karpenter copies them at
	// registration), the unit's among them.
	for _, n := range s.provisionedNodes() {
		if n.Annotations[provision.UnitAnnotation] == unit {
			nodes.Insert(n.Name)
		}
	}
	for _, n := range sets.List(nodes) {
		s.releaseNamed(ctx, n)
	}
	p.forget(unit)
}

// forget drops what the provisioner remembers of a unit.
func (p *provisioner) forget(unit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.failures, unit)
	delete(p.excluded, unit)
	delete(p.inflight, unit)
}

// sweepInterval is how often requests whose unit no longer waits for them
// are looked for.
const sweepInterval = 30 * time.Second

// sweepProvisioning ends, every sweepInterval, the requests no cycle will
// end: a unit that bound while its request stood but whose request a crash
// left open lets its nodes go (finishRequest); a unit that went away
// (its job deleted) before its nodes came has them released, so that no
// node held from disruption is left behind for a gang that is gone.
func (s *Scheduler) sweepProvisioning(ctx context.Context) {
	wait.UntilWithContext(ctx, s.sweepOnce, sweepInterval)
}

func (s *Scheduler) sweepOnce(ctx context.Context) {
	p := s.provisioner.Load()
	if p == nil {
		return
	}
	objs, err := p.claims.List(labels.SelectorFromSet(labels.Set{provision.CreatedByLabel: provision.CreatedBy}))
	if err != nil {
		return
	}
	units := map[string]bool{}
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		if u.GetAnnotations()[provision.DoNotDisruptAnnotation] == "true" {
			units[u.GetAnnotations()[provision.UnitAnnotation]] = true
		}
	}
	// A node still reserved for a unit whose request ended (a patch that
	// failed, a crash between the binding and the release) is let go.
	for _, n := range s.provisionedNodes() {
		// (A node Karpenter has not finished registering may not carry
		// the unit yet: it is left until it does.)
		if unit := n.Annotations[provision.UnitAnnotation]; unit != "" && reserved(n) && !units[unit] {
			s.releaseNode(ctx, n, false)
		}
	}
	for unit := range units {
		k, ok := queue.ParseKey(unit)
		if !ok {
			continue
		}
		pending, bound := s.unitPods(k)
		switch {
		case pending > 0:
			continue // its cycles follow the request
		case bound > 0:
			s.finishRequest(ctx, unit)
		default:
			if r, err := p.standing(unit); err == nil && r != nil {
				klog.FromContext(ctx).Info("Releasing the nodes of a unit that is gone", "unit", unit, "request", r.id)
				s.releaseRequest(ctx, r)
			}
			p.forget(unit)
		}
	}
}

// provisionedNodes are the nodes Karpenter made for Lockstep's NodeClaims
// (they carry the claims' labels), from the cache.
func (s *Scheduler) provisionedNodes() []*corev1.Node {
	nodes, err := s.factory.Core().V1().Nodes().Lister().List(labels.SelectorFromSet(labels.Set{provision.CreatedByLabel: provision.CreatedBy}))
	if err != nil {
		return nil
	}
	return nodes
}

// reserved: the node carries the reserved-for taint.
func reserved(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1beta1.ReservedForTaint {
			return true
		}
	}
	return false
}

// unitPods counts the unit's live pods, pending and bound, from the cache.
func (s *Scheduler) unitPods(k queue.Key) (pending, bound int) {
	pods, err := s.listers.pods.Pods(k.Namespace).List(labels.Everything())
	if err != nil {
		return 0, 0
	}
	unitKey := s.unitKeys()
	for _, p := range pods {
		if !podgroup.Ours(p) || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || unitKey(p) != k {
			continue
		}
		if p.Spec.NodeName == "" {
			pending++
		} else {
			bound++
		}
	}
	return pending, bound
}

func (p *provisioner) nodePools() ([]*provision.NodePool, error) {
	objs, err := p.pools.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []*provision.NodePool
	for _, o := range objs {
		np, err := provision.ReadNodePool(o.(*unstructured.Unstructured))
		if err != nil {
			return nil, err
		}
		out = append(out, np)
	}
	return out, nil
}

func (p *provisioner) excludedFor(unit string, now time.Time) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for k, until := range p.excluded[unit] {
		if now.Before(until) {
			out[k] = true
		}
	}
	for k, until := range p.unavailable {
		if now.Before(until) {
			out[k] = true
		} else {
			delete(p.unavailable, k)
		}
	}
	return out
}

// fail records a unit's failed request: its offering is not tried again
// for the unit for failedOfferingTTL, nor, when Karpenter could not launch
// it (noCapacity), for any unit for unavailableTTL.
func (p *provisioner) fail(unit, offering, msg string, now time.Time, noCapacity bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inflight, unit)
	if p.excluded[unit] == nil {
		p.excluded[unit] = map[string]time.Time{}
	}
	p.excluded[unit][offering] = now.Add(failedOfferingTTL)
	if noCapacity {
		p.unavailable[offering] = now.Add(unavailableTTL)
	}
	p.failures[unit] = append(p.failures[unit], msg)
}

func (p *provisioner) history(unit string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failures[unit]...)
}

// nextAttempt numbers a unit's requests: one past the highest its
// NodeClaims name (so a restarted scheduler does not reuse a name).
func (p *provisioner) nextAttempt(unit string) int {
	objs, _ := p.claims.List(labels.SelectorFromSet(labels.Set{provision.UnitLabel: provision.UnitHash(unit)}))
	n := 0
	for _, o := range objs {
		id := o.(*unstructured.Unstructured).GetLabels()[provision.RequestLabel]
		if i := strings.LastIndex(id, "-"); i >= 0 {
			if v, err := strconv.Atoi(id[i+1:]); err == nil && v > n {
				n = v
			}
		}
	}
	p.mu.Lock()
	n = max(n, len(p.failures[unit]))
	p.mu.Unlock()
	return n + 1
}

// offeringKey is the offering a request's NodeClaims ask for
// (pool/type/zone/capacity type), as provision.Offering.Key.
func offeringKey(claims []*unstructured.Unstructured) string {
	if len(claims) == 0 {
		return ""
	}
	c := claims[0]
	req := map[string]string{}
	reqs, _, _ := unstructured.NestedSlice(c.Object, "spec", "requirements")
	for _, r := range reqs {
		m, _ := r.(map[string]any)
		vals, _ := m["values"].([]any)
		if len(vals) == 1 {
			key, _ := m["key"].(string)
			req[key], _ = vals[0].(string)
		}
	}
	return strings.Join([]string{c.GetLabels()[provision.NodePoolLabel], req[corev1.LabelInstanceTypeStable], req[corev1.LabelTopologyZone], req[provision.CapacityTypeLabel]}, "/")
}

// multiMember reports whether the unit has more than one member: a gang
// or a tree of groups, whose nodes Lockstep asks for (a lone pod's are
// Karpenter's to find, pod by pod, as usual).
func (u *unit) multiMember() bool {
	n := 0
	for _, g := range u.leaves() {
		n += len(g.Members)
	}
	return n > 1
}

// pendingCount is how many of the unit's members are to be placed: at
// most one new node each.
func (u *unit) pendingCount() int {
	n := 0
	for _, g := range u.leaves() {
		n += len(g.Pending)
	}
	return n
}

// eventObject is what the unit's events are about: its root, its
// PodGroup, or its pod.
func (u *unit) eventObject() runtime.Object {
	if u.root != nil {
		return u.root
	}
	for _, g := range u.leaves() {
		if g.Group != nil {
			return g.Group
		}
		for _, p := range g.Pending {
			return p
		}
	}
	return nil
}

// reportProvisioning writes what the provisioner did for a unit that does
// not fit: every pending member's PodScheduled=False with the outcome's
// reason (WaitingForNodes or NoCapacity, never Unschedulable: Karpenter
// provisions for those pod by pod), the group's or root's condition, and
// an event when a pod's message changes.
func (s *Scheduler) reportProvisioning(ctx context.Context, u *unit, d decide.Decision, out provisionOutcome) {
	msg := out.message
	if d.Summary != "" {
		msg = d.Summary + "; " + msg
	}
	for _, g := range u.leaves() {
		for _, p := range g.Pending {
			if s.podStatus.set(p, out.reason, msg, "") {
				s.recorder.Eventf(p, g.related(), corev1.EventTypeNormal, out.reason, "Scheduling", "%s", msg)
			}
		}
		if g.Group != nil && u.root == nil {
			s.setCondition(ctx, g.Group, metav1.ConditionFalse, out.reason, msg)
		}
	}
	if u.root != nil {
		s.setCompositeCondition(ctx, u.root, metav1.ConditionFalse, out.reason, msg)
	}
}
