package scheduler

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamiclister"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// checkHold is how long the room a Ready placement check found is held
// for the workload's pods (a nomination): Kueue admits the workload at
// once, its controller then creates the pods within seconds.
const checkHold = 2 * time.Minute

// Events on a Workload: its placement check's answer, which Kueue resets
// to Pending (losing the message) when it evicts a retried workload.
const (
	eventCheckReady = "PlacementCheckReady"
	eventCheckRetry = "PlacementCheckRetry"
)

// retryPace is the least time between two Retry answers to a workload
// nothing else waits behind. Kueue v0.17 requeues a retried workload at
// once (its requeueAfterSeconds would hold the quota until the delay ends)
// and brings back the workloads that waited for the quota a moment later,
// so the retried one takes the quota again first: answered at once, they
// get it when a Retry lands while they are queued. With nothing behind it
// in its ClusterQueue, a workload that cannot be placed would go round
// (reserve, Retry, evict) as fast as the two controllers write; then the
// answer waits this long, holding quota no one else asked for.
const retryPace = 5 * time.Second

// checkRetryPoll is how soon a workload whose PodGroup does not exist yet
// (its job integration has not created it) is judged again.
const checkRetryPoll = 2 * time.Second

// kueueDiscoveryInterval is how often discovery is asked whether Kueue's
// API is served, while it is not (one request each time).
const kueueDiscoveryInterval = 30 * time.Second

// kueueServed reports whether the API server serves Kueue's Workloads,
// AdmissionChecks and ResourceFlavors.
func kueueServed(d discovery.DiscoveryInterface) (bool, error) {
	for _, r := range []schema.GroupVersionResource{kueuecheck.WorkloadResource, kueuecheck.CheckResource, kueuecheck.FlavorResource, kueuecheck.LocalQueueResource} {
		ok, err := apidiscovery.Serves(d, r.GroupVersion().String(), r.Resource)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// waitServed asks discovery every interval whether served; false when ctx
// ends first.
func (s *Scheduler) waitServed(ctx context.Context, interval time.Duration, served func(discovery.DiscoveryInterface) (bool, error)) bool {
	logger := klog.FromContext(ctx)
	err := wait.PollUntilContextCancel(ctx, interval, false, func(context.Context) (bool, error) {
		ok, err := served(s.client.Discovery())
		if err != nil {
			logger.V(2).Info("Discovery failed; asking again", "err", err)
		}
		return ok, nil
	})
	return err == nil
}

// enableKueue starts watching Kueue once its API is served (Kueue
// installed after Lockstep): the LocalQueues that name the ClusterQueue a
// held unit waits for, and the placement check when it is on. No restart
// needed.
func (s *Scheduler) enableKueue(ctx context.Context, interval time.Duration) {
	logger := klog.FromContext(ctx)
	if !s.waitServed(ctx, interval, kueueServed) {
		return // ctx ended
	}
	s.kueueServed = true
	s.kueueCheck = s.opts.KueuePlacementCheck
	if err := s.setupKueueInformers(); err != nil {
		logger.Error(err, "Watching Kueue")
		return
	}
	s.factory.Start(ctx.Done())
	s.dynFactor.Start(ctx.Done())
	s.factory.WaitForCacheSync(ctx.Done())
	s.dynFactor.WaitForCacheSync(ctx.Done())
	logger.Info("Kueue's API is served now", "placementCheck", s.kueueCheck, "controllerName", kueuecheck.ControllerName)
}

// setupKueueInformers watches, where Kueue's API is served, its
// LocalQueues (watchLocalQueues) and, when the placement check is on, its
// Workloads and AdmissionChecks: a workload whose Lockstep check is
// pending is queued (the loop judges it, on its own view), an
// AdmissionCheck of Lockstep's is marked Active.
func (s *Scheduler) setupKueueInformers() error {
	if err := s.watchLocalQueues(); err != nil {
		return err
	}
	if !s.kueueCheck {
		return nil
	}
	tmpl := s.factory.Resource().V1().ResourceClaimTemplates()
	s.listers.claimTemplates = tmpl.Lister()
	s.handlers = append(s.handlers, tmpl.Informer().HasSynced)
	for _, r := range []struct {
		inf  func() (cache.SharedIndexInformer, dynamiclister.Lister)
		on   func(any)
		into *dynamiclister.Lister
	}{
		{func() (cache.SharedIndexInformer, dynamiclister.Lister) {
			i := s.dynFactor.ForResource(kueuecheck.WorkloadResource)
			return i.Informer(), dynamiclister.New(i.Informer().GetIndexer(), kueuecheck.WorkloadResource)
		}, s.onWorkload, &s.listers.workloads},
		{func() (cache.SharedIndexInformer, dynamiclister.Lister) {
			i := s.dynFactor.ForResource(kueuecheck.CheckResource)
			return i.Informer(), dynamiclister.New(i.Informer().GetIndexer(), kueuecheck.CheckResource)
		}, s.onAdmissionCheck, &s.listers.admissionChecks},
		{func() (cache.SharedIndexInformer, dynamiclister.Lister) {
			i := s.dynFactor.ForResource(kueuecheck.FlavorResource)
			return i.Informer(), dynamiclister.New(i.Informer().GetIndexer(), kueuecheck.FlavorResource)
		}, nil, &s.listers.flavors},
	} {
		inf, l := r.inf()
		if err := inf.SetTransform(cachetrim.Transform); err != nil {
			return err
		}
		*r.into = l
		on := r.on
		if on == nil {
			s.handlers = append(s.handlers, inf.HasSynced)
			continue
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, n any) { on(n) }})
		if err != nil {
			return err
		}
		s.handlers = append(s.handlers, reg.HasSynced)
	}
	return nil
}

func (s *Scheduler) onWorkload(obj any) {
	wl, ok := obj.(*unstructured.Unstructured)
	switch {
	case !ok:
	case len(kueuecheck.PendingChecks(wl, s.ourCheck)) > 0:
		s.queue.Add(queue.WorkloadKey(wl.GetNamespace(), wl.GetName()))
	case kueuecheck.Waiting(wl):
		// It waits for quota: the checks paced in its ClusterQueue while
		// nothing waited are answered now, so the quota a workload that
		// cannot be placed holds goes to this one at once.
		for _, k := range s.paced.take(kueuecheck.ClusterQueue(wl, s.localQueues.get)) {
			s.queue.Add(k)
		}
	}
}

// pacedChecks are workloads whose check is paced, by ClusterQueue.
type pacedChecks struct {
	mu sync.Mutex
	by map[string][]queue.Key
}

// add records k as paced in ClusterQueue cq.
func (p *pacedChecks) add(cq string, k queue.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string][]queue.Key{}
	}
	if !slices.Contains(p.by[cq], k) {
		p.by[cq] = append(p.by[cq], k)
	}
}

// take returns and forgets the workloads paced in cq ("" none).
func (p *pacedChecks) take(cq string) []queue.Key {
	if cq == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.by[cq]
	delete(p.by, cq)
	return out
}

func (s *Scheduler) onAdmissionCheck(obj any) {
	if ac, ok := obj.(*unstructured.Unstructured); ok && kueuecheck.Ours(ac) {
		s.queue.Add(queue.CheckKey(ac.GetName()))
		// Workloads that waited for the check to exist are judged now.
		objs, err := s.listers.workloads.List(labels.Everything())
		if err == nil {
			for _, o := range objs {
				s.onWorkload(o)
			}
		}
	}
}

// ourCheck reports whether the AdmissionCheck named name is answered by
// Lockstep.
func (s *Scheduler) ourCheck(name string) bool {
	if s.listers.admissionChecks == nil {
		return false
	}
	ac, err := s.listers.admissionChecks.Get(name)
	return err == nil && kueuecheck.Ours(ac)
}

// kueueOrder orders placement checks with units: a workload by its
// priority and age, an AdmissionCheck first (it gates every workload).
func (s *Scheduler) kueueOrder(k queue.Key) (int32, time.Time) {
	if k.Kind == queue.Check {
		return math.MaxInt32, time.Time{}
	}
	wl, err := s.listers.workloads.Namespace(k.Namespace).Get(k.Name)
	if err != nil {
		return 0, time.Time{}
	}
	prio, _, _ := unstructured.NestedInt64(wl.Object, "spec", "priority")
	return int32(prio), wl.GetCreationTimestamp().Time
}

// activateCheck marks one of Lockstep's AdmissionChecks Active (Kueue
// keeps a ClusterQueue whose checks are inactive from admitting).
func (s *Scheduler) activateCheck(ctx context.Context, k queue.Key) {
	ac, err := s.listers.admissionChecks.Get(k.Name)
	if err != nil || !kueuecheck.Ours(ac) {
		s.queue.Done(k)
		return
	}
	out, err := kueuecheck.Activate(ac, s.clock.Now())
	if err == nil && out != nil {
		_, err = s.dynamic.Resource(kueuecheck.CheckResource).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "Marking the AdmissionCheck active", "admissionCheck", k.Name)
		s.queue.Retry(k)
		return
	}
	s.queue.Done(k)
}

// checkWorkload answers Lockstep's placement check for a Kueue Workload
// whose quota is reserved: its pod sets, as the gang or tree they will
// become, decided by the loop's own Decide on the loop's own view (the
// pods do not exist yet: they are judged as they will be created, their
// claims as their templates make them). Ready when the unit fits now —
// the check carries the node selectors of the domain chosen (so the
// placement judged is the placement made) and the room is held for the
// pods (a nomination, checkHold) — or after a preemption the scheduler
// makes when they arrive; Retry otherwise, with the decision's words, so
// Kueue releases the quota for workloads that can run.
func (s *Scheduler) checkWorkload(ctx context.Context, it queue.Item) {
	k := it.Key
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "workload", k)
	ctx = klog.NewContext(ctx, logger)
	wl, err := s.listers.workloads.Namespace(k.Namespace).Get(k.Name)
	if err != nil {
		s.queue.Done(k)
		return
	}
	names := kueuecheck.PendingChecks(wl, s.ourCheck)
	if len(names) == 0 {
		s.queue.Done(k)
		return
	}
	j, wait := s.judgeWorkload(ctx, wl)
	if wait {
		s.queue.WaitFor(k, checkRetryPoll)
		return
	}
	if j.state == kueuecheck.StateRetry && !s.othersWaiting(wl) {
		if at, ok := kueuecheck.LastRetried(wl, names[0]); ok {
			if wait := retryPace - s.clock.Since(at); wait > 0 {
				logger.V(2).Info("Not placeable; judging again before retrying", "after", wait)
				s.paced.add(kueuecheck.ClusterQueue(wl, s.localQueues.get), k)
				s.queue.WaitFor(k, wait)
				return
			}
		}
	}
	logger.V(1).Info("Placement check", "state", j.state, "message", j.message)
	if err := s.writeChecks(ctx, k, names, j); err != nil {
		logger.Error(err, "Writing the placement check")
		s.queue.Retry(k)
		return
	}
	if j.hold != nil {
		s.state.Cache.Nominate(j.unitKey, j.hold)
	}
	typ, reason := corev1.EventTypeNormal, eventCheckReady
	if j.state == kueuecheck.StateRetry {
		typ, reason = corev1.EventTypeWarning, eventCheckRetry
	}
	s.recorder.Eventf(wl, nil, typ, reason, "PlacementCheck", "%s", j.message)
	s.queue.Done(k)
}

// othersWaiting reports whether another workload waits for quota in wl's
// ClusterQueue.
func (s *Scheduler) othersWaiting(wl *unstructured.Unstructured) bool {
	lq := s.localQueues.get
	cq := kueuecheck.ClusterQueue(wl, lq)
	objs, err := s.listers.workloads.List(labels.Everything())
	if cq == "" || err != nil {
		return true // unknown: never hold the quota
	}
	for _, o := range objs {
		if o.GetUID() != wl.GetUID() && kueuecheck.Waiting(o) && kueuecheck.ClusterQueue(o, lq) == cq {
			return true
		}
	}
	return false
}

// judgement is a placement check's answer.
type judgement struct {
	state, message string
	updates        []kueuecheck.PodSetUpdate
	// hold is the room to keep for the pods, under their unit's key.
	hold    *snapshot.Nomination
	unitKey string
}

// judgeWorkload decides a workload's pod sets; wait: not yet (its
// PodGroup does not exist).
func (s *Scheduler) judgeWorkload(ctx context.Context, wl *unstructured.Unstructured) (judgement, bool) {
	ns := wl.GetNamespace()
	sets, err := kueuecheck.PodSets(wl, metav1.GetControllerOf(wl))
	if err == nil {
		err = kueuecheck.ApplyFlavors(sets, wl, s.listers.flavors.Get)
	}
	if err != nil {
		return judgement{state: kueuecheck.StateRetry, message: err.Error()}, false
	}
	var pods []*corev1.Pod
	for _, ps := range sets {
		pods = append(pods, ps.Pods...)
	}
	prio64, _, _ := unstructured.NestedInt64(wl.Object, "spec", "priority")
	prio := int32(prio64)
	for _, p := range pods {
		if p.Spec.Priority == nil {
			p.Spec.Priority = ptr.To(prio)
		}
		// A pod of a Kueue pod group joins the PodGroup of its name, as
		// the webhook puts it there at creation.
		if g := p.Labels[podgroup.KueueGroupLabel]; g != "" && podgroup.GroupOf(p) == "" {
			p.Labels[lockv1.PodGroupLabel] = g
		}
		if !podgroup.Ours(p) {
			return judgement{state: kueuecheck.StateReady, message: "its pods are not scheduled by Lockstep (schedulerName " + p.Spec.SchedulerName + "): nothing to check"}, false
		}
	}
	if len(pods) == 0 {
		return judgement{state: kueuecheck.StateReady, message: "no pods to place"}, false
	}
	claims, why := s.podSetClaims(pods)
	if why != "" {
		return judgement{state: kueuecheck.StateRetry, message: why}, false
	}
	for _, c := range claims {
		s.state.Cache.AddClaim(c)
	}
	defer func() {
		for _, c := range claims {
			s.state.Cache.DeleteClaim(c)
		}
	}()
	tu, key, wait := s.podSetUnit(ns, pods)
	if wait {
		return judgement{}, true
	}
	snap := s.state.Snapshot(ctx, key.String(), prio)
	d := decide.Decide(ctx, snap, s.state.CEL, decide.Input{Unit: tu, Priority: prio, DryRun: true, Preemption: func() (*decide.Preemption, error) {
		return s.preemptionInput(ctx, nil, prio, nominationCheck{})
	}})
	nodeOf := map[types.UID]string{}
	labelsOf := func(node string) map[string]string {
		if ni := snap.Node(node); ni != nil {
			return ni.Node.Labels
		}
		return nil
	}
	switch {
	case d.Kind == decide.Bind:
		asgs := d.Assignments()
		for _, a := range asgs {
			nodeOf[a.Pod.UID] = a.Node
		}
		hold := &snapshot.Nomination{Priority: prio, Deadline: s.clock.Now().Add(checkHold)}
		for _, a := range asgs {
			hold.Pods = append(hold.Pods, preemption.NominatedPod(a))
		}
		return judgement{state: kueuecheck.StateReady, message: fmt.Sprintf("%s fits now: %d pods placeable%s; the room is held for its pods", tu.Root.Name(), len(asgs), where(d.Domains())),
			updates: kueuecheck.Pins(sets, nodeOf, labelsOf, d.TopologyKeys()), hold: hold, unitKey: key.String()}, false
	case d.Kind == decide.Preempt && d.Plan != nil:
		for _, a := range d.Plan.Placement.Assignments {
			nodeOf[a.Pod.UID] = a.Node
		}
		return judgement{state: kueuecheck.StateReady, message: fmt.Sprintf("%s fits after preempting %s; the scheduler preempts when its pods are created", tu.Root.Name(), d.Plan.Describe()),
			updates: kueuecheck.Pins(sets, nodeOf, labelsOf, d.TopologyKeys())}, false
	case d.Kind == decide.Wait:
		return judgement{state: kueuecheck.StateRetry, message: d.Reason}, false
	case d.Kind == decide.Error:
		return judgement{state: kueuecheck.StateRetry, message: "scheduler error: " + d.Err.Error()}, false
	}
	msg := d.Summary
	if d.Reason != "" {
		msg += "; " + d.Reason
	}
	return judgement{state: kueuecheck.StateRetry, message: msg}, false
}

// where is " in <domains>" ("" without one).
func where(domains []string) string {
	if len(domains) == 0 {
		return ""
	}
	return " in " + strings.Join(domains, "; ")
}

// podSetClaims are the claims the pods' templates will make, as the
// resourceclaim controller makes them (named <pod>-<claim>, owned by the
// pod), recorded in the pods' status; why says what is missing.
func (s *Scheduler) podSetClaims(pods []*corev1.Pod) ([]*resourcev1.ResourceClaim, string) {
	var out []*resourcev1.ResourceClaim
	for _, p := range pods {
		for _, pc := range p.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName == nil {
				continue
			}
			t, err := s.listers.claimTemplates.ResourceClaimTemplates(p.Namespace).Get(*pc.ResourceClaimTemplateName)
			if err != nil {
				return nil, fmt.Sprintf("ResourceClaimTemplate %s/%s of its pods does not exist", p.Namespace, *pc.ResourceClaimTemplateName)
			}
			c := dra.ClaimFromTemplate(p, pc.Name, t, types.UID("kueue-check-"+string(p.UID)+"-"+pc.Name))
			out = append(out, c)
		}
	}
	return out, ""
}

// podSetUnit is the unit the pods will be scheduled in, resolved as the
// scheduler will resolve it once they exist: their group's (a tree's
// from its root), or lone pods; wait: their group does not exist yet.
func (s *Scheduler) podSetUnit(ns string, pods []*corev1.Pod) (*podgroup.TreeUnit, queue.Key, bool) {
	group := podgroup.GroupOf(pods[0])
	if group == "" {
		return podgroup.Single(&podgroup.Unit{Pods: pods, Members: pods, Pending: pods}), queue.PodKey(ns, pods[0].Name), false
	}
	pg, err := s.podGroup(ns, group)
	if err != nil {
		return nil, queue.Key{}, true
	}
	if parent := podgroup.ParentOf(pg); parent != "" {
		root, _, _ := podgroup.RootOf(parent, s.compositeGetter(ns))
		if root == nil {
			return nil, queue.Key{}, true
		}
		composites, err := s.composites(ns)
		if err != nil {
			return nil, queue.Key{}, true
		}
		groups, err := s.treeGroups(ns)
		if err != nil {
			return nil, queue.Key{}, true
		}
		return podgroup.ResolveTree(root, composites, groups, pods, nil, s.kueueWords()), queue.TreeKey(ns, root.Name), false
	}
	return podgroup.Single(podgroup.Resolve(pg, ns, group, pods, nil, s.kueueWords())), queue.GroupKey(ns, group), false
}

// writeChecks writes the answer into the workload's admission checks,
// reading it again on a conflict.
func (s *Scheduler) writeChecks(ctx context.Context, k queue.Key, names []string, j judgement) error {
	r := s.dynamic.Resource(kueuecheck.WorkloadResource).Namespace(k.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := r.Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		out, err := kueuecheck.SetChecks(cur, names, j.state, j.message, j.updates, s.clock.Now())
		if err != nil {
			return err
		}
		_, err = r.UpdateStatus(ctx, out, metav1.UpdateOptions{})
		return err
	})
}
