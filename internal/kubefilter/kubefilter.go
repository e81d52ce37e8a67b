// Package kubefilter runs kube-scheduler 1.37's own filter plugins whose
// answer depends on the other pods of the cluster — InterPodAffinity
// (required affinity and anti-affinity, including existing pods'
// anti-affinity against the incoming pod) and PodTopologySpread
// (DoNotSchedule constraints with minDomains, nodeAffinityPolicy,
// nodeTaintsPolicy and matchLabelKeys) — through kube-scheduler's framework
// (k8s.io/kubernetes/pkg/scheduler), so that their semantics are
// kube-scheduler's and not a re-implementation.
//
// Differential tests (differential_test.go, dra_differential_test.go,
// volume_differential_test.go) compare Lockstep's answers with
// kube-scheduler's own on generated pods and clusters.
//
// A View is one cycle's pods: built from the bound pods, told of every pod
// the cycle assumes, reserves or removes (so a gang's members placed earlier
// in a cycle count as existing pods for the members placed after them), and
// turned into kube-scheduler's snapshot only when a pod needs it.
package kubefilter

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Plugins are the kube-scheduler plugins a Filters runs, in kube-scheduler's
// default filter order.
var Plugins = []string{
	names.VolumeRestrictions, names.NodeVolumeLimits, names.VolumeBinding, names.VolumeZone,
	names.PodTopologySpread, names.InterPodAffinity,
}

var registerMetrics sync.Once

// Filters is kube-scheduler's framework with Plugins enabled. Its views are
// used one at a time (the scheduler runs one cycle at a time).
type Filters struct {
	fw      framework.Framework
	lister  *lister
	plugins []string
}

// lister hands the framework the snapshot of the view in use.
type lister struct{ fwk.SharedLister }

// New builds the framework. factory serves the listers the plugins read
// (namespaces for InterPodAffinity's namespaceSelector terms; claims,
// volumes, storage classes, CSI nodes, drivers, capacities and volume
// attachments for the volume plugins); the caller starts it. client writes
// volume bindings (VolumeBinding's PreBind).
func New(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface) (*Filters, error) {
	return newFilters(ctx, factory, client, Plugins)
}

// newFilters builds kube-scheduler's framework with the given filter
// plugins enabled (PreFilter and Filter), each with kube-scheduler's
// default arguments, except that PodTopologySpread has no system default
// constraints: they are ScheduleAnyway (scoring), which Lockstep does not do.
func newFilters(ctx context.Context, factory informers.SharedInformerFactory, client kubernetes.Interface, filters []string, opts ...frameworkruntime.Option) (*Filters, error) {
	// The framework records its extension points' durations in
	// kube-scheduler's metrics; they must exist (they are not exported).
	registerMetrics.Do(metrics.Register)
	defaults, err := latest.Default()
	if err != nil {
		return nil, err
	}
	var args []config.PluginConfig
	for _, pc := range defaults.Profiles[0].PluginConfig {
		if pc.Name == names.PodTopologySpread {
			pc.Args = &config.PodTopologySpreadArgs{DefaultingType: config.ListDefaulting}
		}
		args = append(args, pc)
	}
	enabled := make([]config.Plugin, 0, len(filters))
	for _, p := range filters {
		enabled = append(enabled, config.Plugin{Name: p})
	}
	profile := &config.KubeSchedulerProfile{
		SchedulerName: "lockstep",
		Plugins: &config.Plugins{
			// The framework requires a queue sort and a bind plugin; neither
			// runs (Lockstep queues and binds itself).
			QueueSort: config.PluginSet{Enabled: []config.Plugin{{Name: names.PrioritySort}}},
			Bind:      config.PluginSet{Enabled: []config.Plugin{{Name: names.DefaultBinder}}},
			PreFilter: config.PluginSet{Enabled: enabled},
			Filter:    config.PluginSet{Enabled: enabled},
			Reserve:   reserving(filters),
			PreBind:   reserving(filters),
		},
		PluginConfig: args,
	}
	l := &lister{SharedLister: cache.NewEmptySnapshot()}
	fw, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile, append([]frameworkruntime.Option{
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
		frameworkruntime.WithSnapshotSharedLister(l),
		frameworkruntime.WithParallelism(4),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kube-scheduler framework: %w", err)
	}
	return &Filters{fw: fw, lister: l, plugins: filters}, nil
}

// reserving enables the Reserve or PreBind of the plugins that have
// them (VolumeBinding; DynamicResources, which only the differential tests
// run) when they filter.
func reserving(filters []string) config.PluginSet {
	var set config.PluginSet
	for _, f := range filters {
		if f == names.VolumeBinding || f == names.DynamicResources {
			set.Enabled = append(set.Enabled, config.Plugin{Name: f})
		}
	}
	return set
}

// View is one cycle's pods as the plugins see them. It implements
// snapshot.PodConstraints. Building kube-scheduler's snapshot costs a pass
// over every pod, so it is built only for the first pod that needs a check;
// until then changes are kept as differences.
type View struct {
	f     *Filters
	nodes func() []*corev1.Node
	// pods are the pods the view started from (those that hold a node
	// count), read when snap is first built (nil after); added and removed
	// are the changes since, by UID, until snap is built.
	pods    func() []*corev1.Pod
	added   map[types.UID]placed
	removed map[types.UID]bool
	// antiAffinity counts pods with required anti-affinity: while there are
	// none, a pod without constraints of its own needs no check.
	antiAffinity int
	// snap is kube-scheduler's snapshot, built on first need and then kept
	// current.
	snap *cache.Snapshot
	// nodeOf is where each pod held now is, once snap is built.
	nodeOf map[types.UID]placed
}

type placed struct {
	pod  *corev1.Pod
	node string
}

var _ snapshot.PodConstraints = (*View)(nil)

// NewView starts a cycle's view from the nodes and the pods bound to them
// (terminal and unbound pods are ignored).
func (f *Filters) NewView(nodes []*corev1.Node, pods []*corev1.Pod) *View {
	n := 0
	for _, p := range pods {
		if holdsNode(p) && hasRequiredAntiAffinity(p) {
			n++
		}
	}
	return f.NewLazyView(func() []*corev1.Node { return nodes }, func() []*corev1.Pod { return pods }, n)
}

// NewLazyView is NewView where the nodes and pods are read only when a pod
// needs a check (the scheduler's cache supplies them, and counts the pods
// holding a node that have required anti-affinity: antiAffinity).
func (f *Filters) NewLazyView(nodes func() []*corev1.Node, pods func() []*corev1.Pod, antiAffinity int) *View {
	return &View{f: f, nodes: nodes, pods: pods, added: map[types.UID]placed{}, removed: map[types.UID]bool{}, antiAffinity: antiAffinity}
}

// holdsNode reports whether a pod counts on its node: bound and not terminal.
func holdsNode(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// AddPod records that p holds node (assumed or reserved this cycle).
func (v *View) AddPod(p *corev1.Pod, node string) {
	if p.Spec.NodeName != node {
		cp := *p
		cp.Spec.NodeName = node
		p = &cp
	}
	if hasRequiredAntiAffinity(p) {
		v.antiAffinity++
	}
	if v.snap == nil {
		delete(v.removed, p.UID)
		v.added[p.UID] = placed{pod: p, node: node}
		return
	}
	pi, err := framework.NewPodInfo(p)
	if err == nil {
		err = v.snap.AddPod(pi, node)
	}
	if err != nil {
		// Not expected (the API server validated the pod's affinity):
		// start over from the differences on next need.
		v.unbuild()
		v.added[p.UID] = placed{pod: p, node: node}
		return
	}
	v.nodeOf[p.UID] = placed{pod: p, node: node}
}

// RemovePod records that p no longer holds its node (a preemption what-if,
// an assumption rolled back).
func (v *View) RemovePod(p *corev1.Pod) {
	if hasRequiredAntiAffinity(p) {
		v.antiAffinity--
	}
	if v.snap == nil {
		if _, ok := v.added[p.UID]; ok {
			delete(v.added, p.UID)
			return
		}
		v.removed[p.UID] = true
		return
	}
	cur, ok := v.nodeOf[p.UID]
	if !ok {
		return
	}
	delete(v.nodeOf, p.UID)
	if err := v.snap.RemovePod(klog.Background(), cur.pod, cur.node); err != nil {
		v.unbuild()
		v.removed[p.UID] = true
	}
}

// Prepare runs the plugins' PreFilter for pod against the pods held now. It
// returns nil when no plugin has anything to check for it.
func (v *View) Prepare(ctx context.Context, pod *corev1.Pod) (snapshot.PodCheck, error) {
	if !hasConstraints(pod) && v.antiAffinity == 0 {
		return nil, nil
	}
	if err := v.build(); err != nil {
		return nil, err
	}
	v.f.lister.SharedLister = v.snap
	state := framework.NewCycleState()
	res, st, _ := v.f.fw.RunPreFilterPlugins(ctx, state, pod)
	c := &check{v: v, state: state, pod: pod}
	switch {
	case st.IsSkip():
		return nil, nil
	case st.IsRejected():
		c.all = reason(st)
	case !st.IsSuccess():
		return nil, fmt.Errorf("pod %s: %w", klog.KObj(pod), st.AsError())
	}
	if !res.AllNodes() {
		c.only = res.NodeNames
		c.onlyReason = reason(st)
		if c.onlyReason == "" {
			c.onlyReason = "node(s) didn't satisfy plugin(s) " + strings.Join(v.f.plugins, ", ")
		}
	}
	if len(state.GetSkipFilterPlugins()) == len(v.f.plugins) && c.all == "" && c.only == nil {
		return nil, nil
	}
	return c, nil
}

func (v *View) build() error {
	if v.snap != nil {
		return nil
	}
	var base []*corev1.Pod
	if v.pods != nil {
		base, v.pods = v.pods(), nil
	}
	v.nodeOf = make(map[types.UID]placed, len(base)+len(v.added))
	for _, p := range base {
		if holdsNode(p) && !v.removed[p.UID] {
			v.nodeOf[p.UID] = placed{pod: p, node: p.Spec.NodeName}
		}
	}
	for uid, a := range v.added {
		v.nodeOf[uid] = a
	}
	pods := make([]*corev1.Pod, 0, len(v.nodeOf))
	for _, a := range v.nodeOf {
		pods = append(pods, a.pod)
	}
	snap := cache.NewSnapshot(pods, v.nodes())
	if err := snap.StartMutations(); err != nil {
		return err
	}
	v.snap = snap
	v.added, v.removed = nil, nil
	return nil
}

// unbuild drops the snapshot, keeping what it held as differences.
func (v *View) unbuild() {
	v.added, v.removed = map[types.UID]placed{}, map[types.UID]bool{}
	for uid, a := range v.nodeOf {
		v.added[uid] = a
	}
	v.snap, v.nodeOf = nil, nil
}

// check is one pod's PreFilter state.
type check struct {
	v     *View
	state *framework.CycleState
	pod   *corev1.Pod
	// all rejects every node; only, when set, are the nodes PreFilter left.
	all, onlyReason string
	only            sets.Set[string]
}

// Check runs the plugins' Filter on node; it returns "" when the node
// passes, else kube-scheduler's reason.
func (c *check) Check(ctx context.Context, node string) (string, error) {
	if c.all != "" {
		return c.all, nil
	}
	if c.only != nil && !c.only.Has(node) {
		return c.onlyReason, nil
	}
	if c.v.snap == nil {
		return "", fmt.Errorf("pod %s: kube-scheduler snapshot lost during the cycle", klog.KObj(c.pod))
	}
	ni, err := c.v.snap.Get(node)
	if err != nil {
		return "", err
	}
	st := c.v.f.fw.RunFilterPlugins(ctx, c.state, c.pod, ni)
	switch {
	case st.IsSuccess():
		return "", nil
	case st.IsRejected():
		return reason(st), nil
	}
	return "", fmt.Errorf("pod %s on node %s: %w", klog.KObj(c.pod), node, st.AsError())
}

// Reserve assumes the pod's volumes on node (VolumeBinding's Reserve) once
// the pod is placed there; nil when the pod has no volume to bind.
func (c *check) Reserve(ctx context.Context, node string) (snapshot.Reservation, error) {
	if !hasClaims(c.pod) {
		return nil, nil
	}
	if st := c.v.f.fw.RunReservePluginsReserve(ctx, c.state, c.pod, node); !st.IsSuccess() {
		return nil, fmt.Errorf("pod %s on node %s: reserving volumes: %w", klog.KObj(c.pod), node, st.AsError())
	}
	return &reservation{f: c.v.f, state: c.state, pod: c.pod, node: node}, nil
}

// reservation is a pod's volumes assumed on its node.
type reservation struct {
	f     *Filters
	state *framework.CycleState
	pod   *corev1.Pod
	node  string
}

// PreBind writes the volume bindings (PersistentVolume claimRefs, or the
// selected-node annotation for provisioning) and waits until the
// PersistentVolume controller has bound them, as kube-scheduler's
// VolumeBinding does before binding the pod.
func (r *reservation) PreBind(ctx context.Context) error {
	if st := r.f.fw.RunPreBindPlugins(ctx, r.state, r.pod, r.node); !st.IsSuccess() {
		return fmt.Errorf("binding the volumes of pod %s on node %s: %w", klog.KObj(r.pod), r.node, st.AsError())
	}
	return nil
}

// Unreserve forgets the assumed volumes.
func (r *reservation) Unreserve(ctx context.Context) {
	r.f.fw.RunReservePluginsUnreserve(ctx, r.state, r.pod, r.node)
}

func hasClaims(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

func reason(st *fwk.Status) string {
	if st.IsSuccess() {
		return ""
	}
	return strings.Join(st.Reasons(), ", ")
}

// hasConstraints reports whether a pod has constraints of its own the
// plugins check: required pod (anti-)affinity, DoNotSchedule spread, or
// volumes beyond the node-local kinds (claims, ephemeral claims, CSI and
// the in-tree block devices).
func hasConstraints(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		vs := v.VolumeSource
		if vs.PersistentVolumeClaim != nil || vs.Ephemeral != nil || vs.CSI != nil || vs.GCEPersistentDisk != nil ||
			vs.AWSElasticBlockStore != nil || vs.ISCSI != nil || vs.RBD != nil {
			return true
		}
	}
	if a := p.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
		if hasRequiredAntiAffinity(p) {
			return true
		}
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	return false
}

func hasRequiredAntiAffinity(p *corev1.Pod) bool { return snapshot.HasRequiredAntiAffinity(p) }
