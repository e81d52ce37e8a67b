package scheduler

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamiclister"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

type listers struct {
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	podIndex  cache.Indexer
	claims    resourcelisters.ResourceClaimLister
	pdbs      policylisters.PodDisruptionBudgetLister
	podGroups dynamiclister.Lister
	// upstreamPodGroups is nil where scheduling.k8s.io/v1beta1 is not served.
	upstreamPodGroups dynamiclister.Lister
	// composites are CompositePodGroups (and upstreamComposites the
	// in-tree ones, nil where scheduling.k8s.io/v1alpha3 is not served).
	composites, upstreamComposites dynamiclister.Lister
	// workloads, admissionChecks and flavors are Kueue's, claimTemplates
	// the ResourceClaimTemplates their pods will make claims from (only
	// with the placement check on; LocalQueues: Scheduler.localQueues).
	workloads, admissionChecks, flavors dynamiclister.Lister
	claimTemplates                      resourcelisters.ResourceClaimTemplateLister
}

// setupInformers wires the listers the scheduler reads besides its cache
// (the cache itself is fed by cycle.Watch in Run, with wakeups as hooks).
func (s *Scheduler) setupInformers() error {
	f := s.factory
	podInf := f.Core().V1().Pods().Informer()
	if err := podInf.AddIndexers(cache.Indexers{groupIndex: podgroup.IndexByGroup}); err != nil {
		return err
	}
	claimInf := f.Resource().V1().ResourceClaims().Informer()
	if err := claimInf.AddIndexers(cache.Indexers{extendedOwnerIndex: extendedOwnerIndexFunc}); err != nil {
		return err
	}
	s.binder.claimIndex = claimInf.GetIndexer()
	s.listers = listers{
		pods:     f.Core().V1().Pods().Lister(),
		nodes:    f.Core().V1().Nodes().Lister(),
		podIndex: podInf.GetIndexer(),
		claims:   f.Resource().V1().ResourceClaims().Lister(),
		pdbs:     f.Policy().V1().PodDisruptionBudgets().Lister(),
	}
	pgInf := s.dynFactor.ForResource(podgroup.Resource)
	if err := pgInf.Informer().SetTransform(cachetrim.Transform); err != nil {
		return err
	}
	s.listers.podGroups = dynamiclister.New(pgInf.Informer().GetIndexer(), podgroup.Resource)
	onGroup := cache.ResourceEventHandlerFuncs{AddFunc: s.onPodGroup, UpdateFunc: func(o, n any) {
		if !onlyGroupConditionsChanged(o, n) {
			s.onPodGroup(n)
			s.onCheckpoint(o, n)
		}
	}}
	if s.upstreamServed {
		up := s.dynFactor.ForResource(podgroup.UpstreamResource)
		if err := up.Informer().SetTransform(cachetrim.Transform); err != nil {
			return err
		}
		s.listers.upstreamPodGroups = dynamiclister.New(up.Informer().GetIndexer(), podgroup.UpstreamResource)
		if _, err := up.Informer().AddEventHandler(onGroup); err != nil {
			return err
		}
	}
	reg, err := pgInf.Informer().AddEventHandler(onGroup)
	if err != nil {
		return err
	}
	s.handlers = append(s.handlers, reg.HasSynced)
	if err := s.setupCompositeInformers(); err != nil {
		return err
	}
	if err := s.setupKueueInformers(); err != nil {
		return err
	}
	_ = f.Policy().V1().PodDisruptionBudgets().Informer()
	return nil
}

// setupCompositeInformers watches CompositePodGroups (Lockstep's, and the
// in-tree ones where served): a change to one queues its tree.
func (s *Scheduler) setupCompositeInformers() error {
	onComposite := cache.ResourceEventHandlerFuncs{AddFunc: s.onComposite, UpdateFunc: func(o, n any) {
		if !onlyGroupConditionsChanged(o, n) {
			s.onComposite(n)
		}
	}, DeleteFunc: s.onComposite}
	for _, r := range []struct {
		gvr    schema.GroupVersionResource
		into   *dynamiclister.Lister
		served bool
	}{{podgroup.CompositeResource, &s.listers.composites, s.compositesServed}, {podgroup.UpstreamCompositeResource, &s.listers.upstreamComposites, s.upstreamCompositesServed}} {
		if !r.served {
			continue
		}
		inf := s.dynFactor.ForResource(r.gvr)
		if err := inf.Informer().SetTransform(cachetrim.Transform); err != nil {
			return err
		}
		*r.into = dynamiclister.New(inf.Informer().GetIndexer(), r.gvr)
		reg, err := inf.Informer().AddEventHandler(onComposite)
		if err != nil {
			return err
		}
		s.handlers = append(s.handlers, reg.HasSynced)
	}
	return nil
}

// wakeups are the scheduler's reactions to cluster events, run after the
// cache has applied each event (cycle.Hooks): a pending pod queues its
// unit; anything that can free or add capacity moves parked units back.
func (s *Scheduler) wakeups() cycle.Hooks {
	return cycle.Hooks{
		Pods: cache.ResourceEventHandlerFuncs{AddFunc: s.onPodAdd, UpdateFunc: s.onPodUpdate, DeleteFunc: s.onPodDelete},
		Nodes: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.queue.CapacityChanged() },
			UpdateFunc: s.onNodeUpdate,
			DeleteFunc: func(any) { s.queue.CapacityChanged() },
		},
		Classes: s.capacityHandler(),
		Claims: cache.ResourceEventHandlerFuncs{
			AddFunc:    s.onClaimAdd,
			UpdateFunc: s.onClaimUpdate,
			DeleteFunc: func(any) { s.queue.MoveAllToActive() },
		},
		Slices: s.capacityHandler(),
	}
}

// onNodeUpdate wakes parked units only when the node changed in a way that
// can change a placement; status heartbeats (conditions' timestamps,
// images, addresses) wake nobody.
func (s *Scheduler) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 || nodeSchedulingChanged(o, n) {
		s.queue.CapacityChanged()
	}
}

// nodeSchedulingChanged reports whether what placement reads of a node
// differs: labels, taints, schedulability, allocatable, readiness,
// declared features.
func nodeSchedulingChanged(o, n *corev1.Node) bool {
	return o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		!equality.Semantic.DeepEqual(o.Spec.Taints, n.Spec.Taints) ||
		!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
		!slices.Equal(o.Status.DeclaredFeatures, n.Status.DeclaredFeatures) ||
		nodeReady(o) != nodeReady(n)
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// onClaimAdd wakes the unit of the pod a new claim was generated for (the
// unit waits for it); a claim of no pod (one that pods share by name) may
// be what any unit waits for.
func (s *Scheduler) onClaimAdd(obj any) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return
	}
	for _, o := range c.OwnerReferences {
		if o.Kind != "Pod" || o.Controller == nil || !*o.Controller {
			continue
		}
		if p, err := s.listers.pods.Pods(c.Namespace).Get(o.Name); err == nil && p.UID == o.UID {
			if podgroup.Ours(p) && podgroup.Pending(p) {
				s.queue.Add(s.unitKey(p))
			}
			return
		}
	}
	s.queue.MoveAllToActive()
}

// capacityHandler wakes every parked unit, those beyond capacity too: a
// DeviceClass or ResourceSlice changes what nodes offer.
func (s *Scheduler) capacityHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.queue.CapacityChanged() },
		UpdateFunc: func(any, any) { s.queue.CapacityChanged() },
		DeleteFunc: func(any) { s.queue.CapacityChanged() },
	}
}

// onPodAdd counts a new pod in its group's priority, then is onPod.
func (s *Scheduler) onPodAdd(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		s.priorities.joined(pod)
	}
	s.onPod(obj)
}

// onPod queues the unit of a pending Lockstep pod; a pod that stops holding
// its node (finished) may make room for parked units.
func (s *Scheduler) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if podgroup.Ours(pod) && podgroup.Pending(pod) {
		s.queue.Add(s.unitKey(pod))
		return
	}
	s.podStatus.forget(pod.UID)
	if pod.Spec.NodeName != "" && !podgroup.Active(pod) {
		s.queue.MoveAllToActive()
	}
}

// onPodUpdate is onPod for an update that can change a decision: one that
// only changed a pending pod's conditions — the scheduler's own status
// writes, thousands for a gang that does not fit — changes nothing a cycle
// reads, and must not take the unit out of its backoff (it would be
// decided again for each of its members' writes, ahead of younger units).
func (s *Scheduler) onPodUpdate(oldObj, newObj any) {
	if o, ok := oldObj.(*corev1.Pod); ok {
		if n, ok := newObj.(*corev1.Pod); ok {
			if onlyConditionsChanged(o, n) {
				return
			}
			if og, ng := podgroup.GroupOf(o), podgroup.GroupOf(n); og != ng {
				// Moved between groups (Kueue labels a StatefulSet's
				// pods after creating them).
				s.priorities.left(o, og)
				s.priorities.joined(n)
			}
			s.onCheckpoint(o, n)
		}
	}
	s.onPod(newObj)
}

// onCheckpoint wakes the preemptors holding a notice for a pod or
// PodGroup whose lockv1.CheckpointedAtAnnotation changed: the
// acknowledgement ends the notice.
func (s *Scheduler) onCheckpoint(oldObj, newObj any) {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 || o.GetAnnotations()[lockv1.CheckpointedAtAnnotation] == n.GetAnnotations()[lockv1.CheckpointedAtAnnotation] {
		return
	}
	if p, ok := newObj.(*corev1.Pod); ok {
		s.wakeNoticeHolders(p.UID, types.NamespacedName{})
		return
	}
	s.wakeNoticeHolders("", types.NamespacedName{Namespace: n.GetNamespace(), Name: n.GetName()})
}

// onlyConditionsChanged reports whether a pod update changed nothing but
// the pod's status conditions (and the metadata every write changes).
func onlyConditionsChanged(o, n *corev1.Pod) bool {
	// Shallow copies: only their top-level fields are cleared, so nothing
	// the informer's objects point to is copied or touched (this runs for
	// every pod update).
	strip := func(p *corev1.Pod) *corev1.Pod {
		c := *p
		c.ResourceVersion, c.ManagedFields, c.Generation = "", nil, 0
		c.Status.Conditions = nil
		return &c
	}
	return equality.Semantic.DeepEqual(strip(o), strip(n))
}

// onlyGroupConditionsChanged reports whether a PodGroup (or
// CompositePodGroup) update changed nothing but its status conditions —
// the scheduler's own verdict, which must not queue the unit again.
func onlyGroupConditionsChanged(oldObj, newObj any) bool {
	o, ok := oldObj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	n, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		unstructured.RemoveNestedField(c, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c, "metadata", "managedFields")
		unstructured.RemoveNestedField(c, "status", "conditions")
		if st, ok := c["status"].(map[string]any); ok && len(st) == 0 {
			// A group's first condition makes its status: no status
			// and an empty one are the same.
			delete(c, "status")
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(o), strip(n))
}

func (s *Scheduler) onPodDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.podStatus.forget(pod.UID)
	s.priorities.left(pod, podgroup.GroupOf(pod))
	if pod.Spec.NodeName != "" {
		s.queue.MoveAllToActive()
	}
	if podgroup.Ours(pod) && podgroup.GroupOf(pod) != "" {
		// The group may now lack members; re-evaluate its status.
		s.queue.Add(s.unitKey(pod))
	}
}

func (s *Scheduler) onPodGroup(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	s.queue.Add(s.groupKey(u.GetNamespace(), u.GetName()))
}

// onComposite queues the tree a CompositePodGroup is part of (its root's;
// itself, when its parent is missing: it then says so).
func (s *Scheduler) onComposite(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	c, err := podgroup.CompositeFromUnstructured(u)
	if err != nil {
		return
	}
	root := c.Name
	if p := podgroup.CompositeParent(c); p != "" {
		if r, _, _ := podgroup.RootOf(p, s.compositeGetter(c.Namespace)); r != nil {
			root = r.Name
		}
	}
	s.queue.Add(queue.TreeKey(c.Namespace, root))
	// Its groups (a parent created after them) are looked at again.
	groups, err := s.listers.podGroups.Namespace(c.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, g := range groups {
		if pg, err := podgroup.FromUnstructured(g); err == nil && podgroup.ParentOf(pg) == c.Name {
			s.queue.Add(queue.GroupKey(pg.Namespace, pg.Name))
		}
	}
}

// composite returns CompositePodGroup ns/name from the informer cache:
// Lockstep's, else the in-tree one of that name where served.
func (s *Scheduler) composite(ns, name string) (*lockv1.CompositePodGroup, error) {
	var u *unstructured.Unstructured
	var err error = apierrors.NewNotFound(podgroup.CompositeResource.GroupResource(), name)
	if s.listers.composites != nil {
		u, err = s.listers.composites.Namespace(ns).Get(name)
	}
	if apierrors.IsNotFound(err) && s.listers.upstreamComposites != nil {
		u, err = s.listers.upstreamComposites.Namespace(ns).Get(name)
	}
	if err != nil {
		return nil, err
	}
	return podgroup.CompositeFromUnstructured(u)
}

// compositeGetter looks CompositePodGroups of ns up by name (nil: none).
func (s *Scheduler) compositeGetter(ns string) func(string) *lockv1.CompositePodGroup {
	return func(name string) *lockv1.CompositePodGroup {
		c, err := s.composite(ns, name)
		if err != nil {
			return nil
		}
		return c
	}
}

// onClaimUpdate: a deallocation frees devices; a new status on a claim a
// waiting pod needs may unblock it.
func (s *Scheduler) onClaimUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*resourcev1.ResourceClaim)
	n, ok2 := newObj.(*resourcev1.ResourceClaim)
	if !ok1 || !ok2 {
		return
	}
	if o.Status.Allocation != nil && n.Status.Allocation == nil || len(n.Status.ReservedFor) < len(o.Status.ReservedFor) {
		s.queue.MoveAllToActive()
	}
}

// podGroup returns the group from the informer cache: Lockstep's PodGroup,
// else the in-tree one of the same name where it is served. The returned
// object's apiVersion says which (see podgroup.ResourceOf).
func (s *Scheduler) podGroup(ns, name string) (*lockv1.PodGroup, error) {
	u, err := s.listers.podGroups.Namespace(ns).Get(name)
	if apierrors.IsNotFound(err) && s.listers.upstreamPodGroups != nil {
		u, err = s.listers.upstreamPodGroups.Namespace(ns).Get(name)
	}
	if err != nil {
		return nil, err
	}
	return podgroup.FromUnstructured(u)
}
