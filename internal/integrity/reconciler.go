package integrity

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Field indexes on the manager's pod cache.
const (
	indexNodeName = "spec.nodeName"
	indexGroup    = "lockstep.podGroup"
)

// Reconciler keeps every Lockstep PodGroup's state true (the Running
// condition, the current incarnation's member outcomes) and restarts gangs
// with disruptionMode all that lost a member. It reads the manager's caches,
// and the API server only for what a verdict asks to confirm (a member or a
// node the caches do not show for sure); Decide makes every choice.
type Reconciler struct {
	Client client.Client
	// HoldPodInformer is a fault-test hook (holdPodInformer); "" is off.
	HoldPodInformer string
	// Reader reads from the API server, not a cache; SetupWithManager
	// defaults it to the manager's.
	Reader   client.Reader
	Recorder record.EventRecorder
	// Kube is used for the ResourceSlice tracker's informers.
	Kube kubernetes.Interface
	// NodeGrace is how long a member's node may be NotReady before the gang restarts.
	NodeGrace time.Duration
	// TaintRules: the cluster serves resource.k8s.io/v1 DeviceTaintRules,
	// whose taints count like those in ResourceSlices.
	TaintRules bool
	// Integrations resolve a group's owner (its Job, JobSet, …) for
	// scale-downs and suspension; WatchOwners watches each.
	Integrations jobintegration.Set
	// Clock defaults to the real clock.
	Clock clock.PassiveClock

	metrics  *metrics.Integrity
	slices   *sliceSource
	departed departedPods
	warned   warnedPods
	ctl      controller.Controller
	cache    crcache.Cache
}

// SetupWithManager watches PodGroups, their pods, their owners, nodes and
// ResourceSlices (with DeviceTaintRules applied).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Reader == nil {
		r.Reader = mgr.GetAPIReader()
	}
	m, err := metrics.NewIntegrity(crmetrics.Registry)
	if err != nil {
		return err
	}
	r.metrics = m
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Pod{}, indexNodeName, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &corev1.Pod{}, indexGroup, func(o client.Object) []string {
		if g := podgroup.GroupOf(o.(*corev1.Pod)); g != "" {
			return []string{g}
		}
		return nil
	}); err != nil {
		return err
	}
	r.slices = &sliceSource{kube: r.Kube, taintRules: r.TaintRules, groups: r.groupsOfSlice, taints: newTaintIndex()}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gang-integrity").
		For(&lockv1.PodGroup{}).
		Watches(&corev1.Pod{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueGroup(q, e.Object)
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueGroup(q, e.ObjectNew)
			},
			DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if p, ok := e.Object.(*corev1.Pod); ok && podgroup.GroupOf(p) != "" {
					r.departed.add(p, r.Clock.Now())
				}
				enqueueGroup(q, e.Object)
			},
		}).
		Watches(&lockv1.PodGroup{}, handler.Funcs{
			// A group of a tree deleted: its siblings judge whether the
			// tree is now short of a group (TreeShort).
			DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if pg, ok := e.Object.(*lockv1.PodGroup); ok && podgroup.ParentOf(pg) != "" {
					for _, req := range r.treeGroups(ctx, pg.Namespace) {
						q.Add(req)
					}
				}
			},
		}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.groupsOnNode)).
		WatchesRawSource(r.slices)
	ctl, err := b.Build(r)
	if err != nil {
		return err
	}
	r.ctl, r.cache = ctl, mgr.GetCache()
	return holdPodInformer(ctx, mgr.GetCache(), r.HoldPodInformer)
}

// WatchOwners watches the jobs of one integration (their suspension,
// completion and scale-downs change their gangs' verdicts). It is called
// per integration once the API server serves its kind, before or after
// the manager started.
func (r *Reconciler) WatchOwners(integ jobintegration.Integration) error {
	return r.ctl.Watch(source.Kind(r.cache, integ.NewObject(), handler.EnqueueRequestsFromMapFunc(r.groupsOwnedBy)))
}

func enqueueGroup(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	if p, ok := o.(*corev1.Pod); ok {
		if g := podgroup.GroupOf(p); g != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: g}})
		}
	}
}

// groupsOnNode: the groups with a pod on the node.
func (r *Reconciler) groupsOnNode(ctx context.Context, n client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.MatchingFields{indexNodeName: n.GetName()}); err != nil {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for _, p := range pods.Items {
		if g := podgroup.GroupOf(&p); g != "" {
			k := types.NamespacedName{Namespace: p.Namespace, Name: g}
			if !seen[k] {
				seen[k] = true
				out = append(out, reconcile.Request{NamespacedName: k})
			}
		}
	}
	return out
}

// groupsOfSlice: a node-local slice concerns the groups on its node; a
// slice of devices reachable from many nodes, every group.
func (r *Reconciler) groupsOfSlice(ctx context.Context, s *resourcev1.ResourceSlice) []reconcile.Request {
	if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		return r.groupsOnNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: *s.Spec.NodeName}})
	}
	groups := &lockv1.PodGroupList{}
	if err := r.Client.List(ctx, groups); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(groups.Items))
	for _, g := range groups.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
	}
	return out
}

// treeGroups: the groups of namespace ns that hang in a tree.
func (r *Reconciler) treeGroups(ctx context.Context, ns string) []reconcile.Request {
	groups := &lockv1.PodGroupList{}
	if err := r.Client.List(ctx, groups, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, g := range groups.Items {
		if podgroup.ParentOf(&g) != "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
		}
	}
	return out
}

// groupsOwnedBy: the groups a job controls.
func (r *Reconciler) groupsOwnedBy(ctx context.Context, o client.Object) []reconcile.Request {
	groups := &lockv1.PodGroupList{}
	if err := r.Client.List(ctx, groups, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, g := range groups.Items {
		if ref := metav1.GetControllerOf(&g); ref != nil && ref.UID == o.GetUID() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
		}
	}
	return out
}

// Reconcile judges one group and writes the verdict.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pg := &lockv1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	v, err := r.view(ctx, pg)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.warnStoppedSucceeded(pg, v.Pods)
	vd, err := r.decide(ctx, v)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.apply(ctx, pg, vd); err != nil {
		if apierrors.IsConflict(err) {
			// A stale cache: again, rate-limited, without logging an error.
			return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // SA1019: RequeueAfter would drop the rate limiter's backoff
		}
		return ctrl.Result{}, err
	}
	inc := pg.Status.Incarnation
	if vd.Incarnation != nil {
		inc = vd.Incarnation
	}
	if err := r.restartTree(ctx, pg, inc); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // SA1019: as above
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: vd.RequeueAfter}, nil
}

// warnStoppedSucceeded warns, on the pod and its group, of each member
// Lockstep stopped that ended Succeeded (ReasonStoppedMemberSucceeded).
func (r *Reconciler) warnStoppedSucceeded(pg *lockv1.PodGroup, pods []*corev1.Pod) {
	for _, p := range pods {
		if msg := stoppedButSucceeded(p); msg != "" && r.warned.first(p.UID) {
			r.Recorder.Event(p, corev1.EventTypeWarning, ReasonStoppedMemberSucceeded, msg)
			r.Recorder.Event(pg, corev1.EventTypeWarning, ReasonStoppedMemberSucceeded, msg)
		}
	}
}

// view reads what Decide needs, from the caches only.
func (r *Reconciler) view(ctx context.Context, pg *lockv1.PodGroup) (View, error) {
	v := View{Group: pg, Now: r.Clock.Now(), NodeGrace: r.NodeGrace}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: pg.Namespace}, ns); err == nil && ns.DeletionTimestamp != nil {
		v.NamespaceTerminating = true
		return v, nil
	}
	pods := &corev1.PodList{}
	// Not copied (Decide only reads; eviction copies what it writes): a
	// big gang is reconciled on each of its pods' events.
	if err := r.Client.List(ctx, pods, client.InNamespace(pg.Namespace), client.MatchingFields{indexGroup: pg.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return v, err
	}
	for i := range pods.Items {
		v.Pods = append(v.Pods, &pods.Items[i])
	}
	v.Departed = r.departed.of(pg.Namespace, pg.Name)
	v.Node = func(name string) (*corev1.Node, bool) {
		n := &corev1.Node{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
			// Only a node the cache knows to be gone is lost.
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, !apierrors.IsNotFound(err)
		}
		return n, true
	}
	v.Claim = func(ns, name string) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
			return nil
		}
		return c
	}
	v.Taints = r.slices.taints.taints
	owner, err := r.owner(ctx, pg)
	if err != nil {
		return v, err
	}
	v.Owner = owner
	var wanted map[string]int
	if owner != nil {
		wanted = owner.Children
	}
	v.TreeShort, err = r.treeShort(ctx, pg, wanted)
	return v, err
}

// owner resolves the group's controller through the integration set; nil
// for a group no integration's kind controls (bare pods).
func (r *Reconciler) owner(ctx context.Context, pg *lockv1.PodGroup) (*Owner, error) {
	ref := metav1.GetControllerOf(pg)
	if ref == nil {
		return nil, nil
	}
	integ := r.Integrations.ForKind(ref.APIVersion, ref.Kind)
	if integ == nil {
		return nil, nil
	}
	name := ref.Kind + " " + pg.Namespace + "/" + ref.Name
	obj := integ.NewObject()
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return &Owner{Name: name, Stopped: "deleted", Failed: true}, nil
		}
		return nil, err
	}
	if obj.GetUID() != ref.UID {
		return &Owner{Name: name, Stopped: "deleted", Failed: true}, nil
	}
	j := integ.Wrap(obj)
	why, failed, suspended := j.Stopped()
	o := &Owner{Name: name, Stopped: why, Failed: failed, Suspended: suspended, Wants: jobintegration.WantsIndex(j)}
	if suspended {
		o.Held = jobintegration.KueueHeld(j, r.clusterQueueOf(ctx))
	}
	if groups, err := jobintegration.Groups(j); err == nil {
		for _, g := range groups {
			if g.Name == pg.Name {
				o.Size = int(g.Size)
			}
			if g.Parent != nil {
				if o.Children == nil {
					o.Children = map[string]int{}
				}
				o.Children[g.Parent.Name]++
			}
		}
	}
	return o, nil
}

// clusterQueueOf names the ClusterQueue a Kueue LocalQueue feeds, read from
// the API server (not a cache: it is read only for a job Kueue keeps
// suspended, and a cache of LocalQueues would wait for ever where this
// controller may not list them); an error (Kueue not served, no right to
// get LocalQueues) leaves the LocalQueue named, with why.
func (r *Reconciler) clusterQueueOf(ctx context.Context) podgroup.ClusterQueueOf {
	return kueuecheck.ClusterQueueOf(func(ns, name string) (*unstructured.Unstructured, error) {
		lq := &unstructured.Unstructured{}
		lq.SetGroupVersionKind(kueuecheck.LocalQueueResource.GroupVersion().WithKind("LocalQueue"))
		return lq, r.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, lq)
	})
}

// apply writes a verdict: status first (so a crash never evicts without the
// reason recorded, and an interrupted restart is finished from the record),
// then evictions, then the event and metric of a new restart.
func (r *Reconciler) apply(ctx context.Context, pg *lockv1.PodGroup, vd Verdict) error {
	logger := ctrl.LoggerFrom(ctx)
	cur := pg.DeepCopy()
	changed := false
	if vd.Incarnation != nil && !equality.Semantic.DeepEqual(cur.Status.Incarnation, vd.Incarnation) {
		cur.Status.Incarnation = vd.Incarnation
		changed = true
	}
	if vd.Running.Type != "" && conditionDiffers(cur.Status.Conditions, vd.Running) {
		meta.SetStatusCondition(&cur.Status.Conditions, vd.Running)
		changed = true
	}
	if vd.Restart != nil {
		meta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
			Type: lockv1.DisruptionTarget, Status: metav1.ConditionTrue, Reason: vd.Restart.Reason,
			Message: vd.EvictMessage, ObservedGeneration: pg.Generation,
		})
		changed = true
	}
	if changed {
		if err := r.Client.Status().Update(ctx, cur); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if vd.Restart != nil {
		logger.Info("Gang lost a member; restarting it whole", "podGroup", klogRef(pg), "reason", vd.Restart.Reason, "detail", vd.Restart.Detail, "evicting", len(vd.Evict))
		r.metrics.GangRestarts.WithLabelValues(vd.Restart.Reason).Inc()
		r.Recorder.Eventf(pg, corev1.EventTypeWarning, "GangRestart", "%s: restarting the whole gang (disruptionMode all), evicting %d running members", vd.Restart.Detail, len(vd.Evict))
	}
	r.recordUnhealthy(ctx, pg, vd)
	if len(vd.Evict) > 0 {
		return r.evict(ctx, vd.Evict, vd.EvictReason, vd.EvictMessage)
	}
	return nil
}

// recordUnhealthy tells of each member a verdict acts on for an unhealthy
// device, on its pod and its group, naming the device: once the pod is
// gone, the group's event and incarnation record are what remain of it.
func (r *Reconciler) recordUnhealthy(ctx context.Context, pg *lockv1.PodGroup, vd Verdict) {
	what := "the whole gang restarts (disruptionMode all)"
	if vd.Restart == nil {
		what = "this member is taken down alone (disruptionMode single)"
	}
	for _, u := range vd.Unhealthy {
		ctrl.LoggerFrom(ctx).Info("Member on an unhealthy device", "podGroup", klogRef(pg), "pod", u.Pod.Name, "device", u.Device.Device, "message", u.Device.Message)
		r.metrics.UnhealthyDevices.WithLabelValues(u.Device.Kind()).Inc()
		r.Recorder.Eventf(u.Pod, corev1.EventTypeWarning, ReasonDeviceUnhealthy, "%s: %s", capitalize(u.Device.String()), what)
		r.Recorder.Eventf(pg, corev1.EventTypeWarning, ReasonDeviceUnhealthy, "pod %s: %s: %s", u.Pod.Name, u.Device, what)
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// conditionDiffers reports whether writing c would change conds.
func conditionDiffers(conds []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(conds, c.Type)
	return old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message || old.ObservedGeneration != c.ObservedGeneration
}

func klogRef(pg *lockv1.PodGroup) string { return pg.Namespace + "/" + pg.Name }
