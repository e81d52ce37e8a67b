package integrity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/scheduler"
)

// Restart reasons (PodGroup DisruptionTarget condition and metric label).
const (
	ReasonMemberFailed = "MemberFailed"
	ReasonMemberLost   = "MemberLost"
	ReasonNodeLost     = "NodeLost"
	ReasonDeviceFailed = "DeviceFailed"
	// PodReason is the DisruptionTarget reason on the pods Lockstep evicts;
	// a Job's podFailurePolicy can ignore it (docs/integrity.md).
	PodReason = "GangRestartByLockstep"
)

// settleDelay: how long a partial gang must stay partial to count as broken.
const settleDelay = 5 * time.Second

// Reconciler restarts broken gangs.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// NodeGrace is how long a member's node may be NotReady before the gang restarts.
	NodeGrace time.Duration
	// TaintRules: the cluster serves resource.k8s.io/v1 DeviceTaintRules,
	// whose NoExecute taints count like those in ResourceSlices.
	TaintRules bool

	restarts *prometheus.CounterVec
	mu       sync.Mutex
	// lost remembers running members that disappeared (deleted, evicted)
	// until the gang is restarted: the scheduler may bind a replacement
	// before this controller runs, which would otherwise hide the loss.
	lost map[types.NamespacedName]string
	// ended are the pods of gang incarnations already restarted — the
	// members this controller evicts and those already gone — until they are
	// deleted: their end is the restart, not a new loss (superseded.go).
	ended map[types.UID]bool
}

// SetupWithManager watches PodGroups, their pods, nodes and ResourceSlices.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.lost = map[types.NamespacedName]string{}
	r.ended = map[types.UID]bool{}
	r.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockstep_gang_restarts_total",
		Help: "Gangs taken down whole because a member was lost, by reason.",
	}, []string{"reason"})
	if err := crmetrics.Registry.Register(r.restarts); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gang-integrity")
	if r.TaintRules {
		b = b.Watches(&resourcev1.DeviceTaintRule{}, handler.EnqueueRequestsFromMapFunc(r.allGroups))
	}
	return b.
		For(&lockv1.PodGroup{}).
		Watches(&corev1.Pod{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueGroup(q, e.Object)
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueueGroup(q, e.ObjectNew)
			},
			DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.memberDeleted(e.Object)
				enqueueGroup(q, e.Object)
			},
		}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.groupsOnNode)).
		Watches(&resourcev1.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if n := o.(*resourcev1.ResourceSlice).Spec.NodeName; n != nil {
				return r.groupsOnNode(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: *n}})
			}
			return nil
		})).
		Complete(r)
}

// allGroups: a DeviceTaintRule may select devices anywhere.
func (r *Reconciler) allGroups(ctx context.Context, _ client.Object) []reconcile.Request {
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

func enqueueGroup(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	if p, ok := o.(*corev1.Pod); ok {
		if g := scheduler.GroupOf(p); g != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: g}})
		}
	}
}

// memberDeleted remembers a running member that went away, unless it
// belonged to a gang incarnation already restarted.
func (r *Reconciler) memberDeleted(o client.Object) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended[p.UID] {
		delete(r.ended, p.UID)
		return
	}
	if scheduler.GroupOf(p) == "" || !scheduler.Active(p) || scheduler.HasDisruption(p, corev1.PodReasonPreemptionByScheduler) {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: scheduler.GroupOf(p)}
	if _, seen := r.lost[key]; !seen {
		r.lost[key] = fmt.Sprintf("running pod %s was deleted or evicted", p.Name)
	}
}

func (r *Reconciler) takeLost(key types.NamespacedName) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	detail := r.lost[key]
	delete(r.lost, key)
	return detail
}

func (r *Reconciler) groupsOnNode(ctx context.Context, n client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.MatchingFields{"spec.nodeName": n.GetName()}); err != nil {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for _, p := range pods.Items {
		if g := scheduler.GroupOf(&p); g != "" {
			k := types.NamespacedName{Namespace: p.Namespace, Name: g}
			if !seen[k] {
				seen[k] = true
				out = append(out, reconcile.Request{NamespacedName: k})
			}
		}
	}
	return out
}

// Reconcile checks one gang and restarts it if it lost a member.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pg := &lockv1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.Single != nil {
		return ctrl.Result{}, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: pg.Namespace}, ns); err == nil && ns.DeletionTimestamp != nil {
		// Everything in it is going away; a restart would only make the
		// Job controller recreate pods the namespace refuses.
		return ctrl.Result{}, nil
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled); c == nil || c.Status != metav1.ConditionTrue {
		return ctrl.Result{}, nil // not admitted yet: nothing can be lost
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(pg.Namespace), client.MatchingLabels{lockv1.PodGroupLabel: pg.Name}); err != nil {
		return ctrl.Result{}, err
	}
	g := r.inspect(ctx, pg, pods.Items)
	if detail := r.takeLost(req.NamespacedName); detail != "" && len(g.bound) > 0 {
		g.reason, g.detail, g.transient = ReasonMemberLost, detail, false
	}
	if len(g.bound) == 0 || g.reason == "" {
		return ctrl.Result{}, nil
	}
	if g.transient && time.Since(g.since) < settleDelay {
		return ctrl.Result{RequeueAfter: settleDelay}, nil
	}
	return ctrl.Result{}, r.restart(ctx, pg, g)
}

// gang is what inspect found.
type gang struct {
	bound []*corev1.Pod
	// gone are the members already Failed or being deleted.
	gone   []types.UID
	reason string
	detail string
	// transient: the only symptom is a partial gang, which binding also shows
	// for a moment; since is when the oldest pending member was created.
	transient bool
	since     time.Time
}

func (r *Reconciler) inspect(ctx context.Context, pg *lockv1.PodGroup, pods []corev1.Pod) gang {
	var g gang
	taints := r.noExecuteTaints(ctx)
	alive, pendingCount := 0, 0
	for i := range pods {
		p := &pods[i]
		if !scheduler.Ours(p) || scheduler.HasDisruption(p, corev1.PodReasonPreemptionByScheduler) {
			// The scheduler took a preempted member; it evicts a group
			// with disruptionMode all whole itself.
			continue
		}
		if r.superseded(p) {
			continue // a member of an incarnation already restarted
		}
		if p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			g.gone = append(g.gone, p.UID)
		}
		switch {
		case p.Status.Phase == corev1.PodFailed && g.reason == "":
			g.reason, g.detail = ReasonMemberFailed, fmt.Sprintf("pod %s failed", p.Name)
		case p.DeletionTimestamp != nil && p.Spec.NodeName != "" && g.reason == "":
			g.reason, g.detail = ReasonMemberLost, fmt.Sprintf("pod %s is being deleted", p.Name)
		case scheduler.Active(p) && p.DeletionTimestamp == nil:
			g.bound = append(g.bound, p)
			alive++
			if reason, detail := r.nodeOrDeviceLost(ctx, p, taints); reason != "" && g.reason == "" {
				g.reason, g.detail = reason, detail
			}
		case scheduler.Pending(p):
			alive++
			pendingCount++
			if g.since.IsZero() || p.CreationTimestamp.Time.Before(g.since) {
				g.since = p.CreationTimestamp.Time
			}
		}
	}
	minCount := 1
	if gp := pg.Spec.SchedulingPolicy.Gang; gp != nil {
		minCount = int(gp.MinCount)
	}
	if g.reason == "" && len(g.bound) > 0 && len(g.bound) < minCount {
		g.transient = pendingCount > 0
		g.reason = ReasonMemberLost
		g.detail = fmt.Sprintf("only %d of minCount %d members are running (%d exist)", len(g.bound), minCount, alive)
		if !g.transient {
			g.since = time.Time{}
		}
	}
	return g
}

// nodeOrDeviceLost reports a member whose node is gone or NotReady past
// the grace period, or whose claim holds a device tainted NoExecute.
func (r *Reconciler) nodeOrDeviceLost(ctx context.Context, p *corev1.Pod, taints map[string]string) (string, string) {
	node := &corev1.Node{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, node)
	if apierrors.IsNotFound(err) {
		return ReasonNodeLost, fmt.Sprintf("node %s of pod %s was deleted", p.Spec.NodeName, p.Name)
	}
	if err == nil {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue && time.Since(c.LastTransitionTime.Time) > r.NodeGrace {
				return ReasonNodeLost, fmt.Sprintf("node %s of pod %s has been NotReady for %s", node.Name, p.Name, time.Since(c.LastTransitionTime.Time).Round(time.Second))
			}
		}
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.ResourceClaimName == nil {
			continue
		}
		claim := &resourcev1.ResourceClaim{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: *st.ResourceClaimName}, claim); err != nil || claim.Status.Allocation == nil {
			continue
		}
		for _, res := range claim.Status.Allocation.Devices.Results {
			if taint := taints[res.Driver+"/"+res.Pool+"/"+res.Device]; taint != "" {
				return ReasonDeviceFailed, fmt.Sprintf("device %s/%s of pod %s is tainted %s", res.Pool, res.Device, p.Name, taint)
			}
		}
	}
	return "", ""
}

// noExecuteTaints maps "driver/pool/device" to its NoExecute taint, from one
// read of the ResourceSlices (and the DeviceTaintRules, where served).
func (r *Reconciler) noExecuteTaints(ctx context.Context) map[string]string {
	out := map[string]string{}
	slices := &resourcev1.ResourceSliceList{}
	if err := r.Client.List(ctx, slices); err != nil {
		return out
	}
	var rules []resourcev1.DeviceTaintRule
	if r.TaintRules {
		list := &resourcev1.DeviceTaintRuleList{}
		if err := r.Client.List(ctx, list); err == nil {
			rules = list.Items
		}
	}
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			key := s.Spec.Driver + "/" + s.Spec.Pool.Name + "/" + d.Name
			for _, t := range d.Taints {
				if t.Effect == resourcev1.DeviceTaintEffectNoExecute {
					out[key] = fmt.Sprintf("%s=%s:NoExecute", t.Key, t.Value)
				}
			}
			for _, rule := range rules {
				if rule.Spec.Taint.Effect == resourcev1.DeviceTaintEffectNoExecute && selects(rule.Spec.DeviceSelector, s.Spec.Driver, s.Spec.Pool.Name, d.Name) {
					out[key] = fmt.Sprintf("%s=%s:NoExecute (DeviceTaintRule %s)", rule.Spec.Taint.Key, rule.Spec.Taint.Value, rule.Name)
				}
			}
		}
	}
	return out
}

// selects reports whether a DeviceTaintRule selector matches a device; an
// unset field matches anything.
func selects(sel *resourcev1.DeviceTaintSelector, driver, pool, device string) bool {
	if sel == nil {
		return true
	}
	return (sel.Driver == nil || *sel.Driver == driver) &&
		(sel.Pool == nil || *sel.Pool == pool) &&
		(sel.Device == nil || *sel.Device == device)
}
