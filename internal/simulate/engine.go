package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Epoch is the wall-clock time virtual time 0 maps to (timestamps on the
// simulated objects; fixed, so runs are reproducible).
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// world is one model's simulation: the scheduler's cycle state over an
// in-memory cluster, the jobs' controllers, and a virtual clock that jumps
// from event to event.
type world struct {
	ctx context.Context
	m   Model
	cl  *Cluster
	wl  *workload.Workload
	st  *cycle.State
	clk *testingclock.FakePassiveClock
	now time.Duration

	events eventQueue
	seq    int

	jobs   []*jobRun
	pods   map[types.UID]*podRun
	groups map[types.NamespacedName]*groupRun
	trees  map[types.NamespacedName]*treeRun
	units  unitQueue
	// nodes and slices as they are now (failures change them); claims are
	// the claims the cache holds, by key.
	nodes  map[string]*corev1.Node
	slices map[string]*resourcev1.ResourceSlice
	claims map[types.NamespacedName]*resourcev1.ResourceClaim
	// onNode are the pods bound to each node.
	onNode map[string]map[types.UID]*podRun

	// freed counts releases of capacity, changed every change of what is
	// placed: a unit that did not fit is tried again only once the
	// counter it waits for moved.
	freed, changed uint64
	// globalDevices: the cluster has devices no node holds alone, which
	// the cheap capacity check cannot count per node.
	globalDevices bool
	features      features.Features
	// draNames are the extended resources DeviceClasses serve.
	draNames map[corev1.ResourceName]bool

	rec *recorder
	err error
	// noBatch decides lone pods one at a time, noCheck without the
	// capacity check (tests compare them with the fast paths).
	noBatch, noCheck bool
	// shortWait and delay: Options.PreemptionShortWait, PreemptionDelay.
	shortWait time.Duration
	delay     map[string]time.Duration
}

func newWorld(ctx context.Context, m Model, cl *Cluster, wl *workload.Workload, opts Options) *world {
	clk := testingclock.NewFakePassiveClock(Epoch)
	cache := snapshot.NewCache(time.Minute, features.Default(), clk)
	w := &world{
		ctx: ctx, m: m, cl: cl, wl: wl, clk: clk,
		st:     &cycle.State{Cache: cache, CEL: dra.NewCache(), Clock: clk},
		pods:   map[types.UID]*podRun{},
		groups: map[types.NamespacedName]*groupRun{},
		trees:  map[types.NamespacedName]*treeRun{},
		nodes:  map[string]*corev1.Node{},
		slices: map[string]*resourcev1.ResourceSlice{},
		claims: map[types.NamespacedName]*resourcev1.ResourceClaim{},
		onNode: map[string]map[types.UID]*podRun{},

		features: features.Default(),
		draNames: map[corev1.ResourceName]bool{},
	}
	for _, n := range cl.Nodes {
		w.nodes[n.Name] = n
		cache.AddNode(n)
	}
	for _, sl := range cl.Slices {
		w.slices[sl.Name] = sl
		cache.AddSlice(sl)
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName == "" {
			w.globalDevices = true
		}
	}
	for _, c := range append(append([]*resourcev1.DeviceClass(nil), cl.Classes...), wl.DeviceClasses...) {
		cache.AddClass(c)
		if n := c.Spec.ExtendedResourceName; n != nil {
			w.draNames[corev1.ResourceName(*n)] = true
		}
	}
	for _, c := range wl.Claims {
		c = c.DeepCopy()
		c.UID = types.UID("claim-" + c.Namespace + "-" + c.Name)
		c.CreationTimestamp = metav1.NewTime(Epoch)
		w.putClaim(c)
	}
	w.rec = newRecorder(w, opts)
	w.noBatch, w.noCheck = opts.noBatch, opts.noCheck
	if m.waits {
		w.shortWait, w.delay = opts.PreemptionShortWait, opts.PreemptionDelay
	}
	for i, j := range wl.Jobs {
		jr := &jobRun{spec: j, index: i, pods: map[types.UID]*podRun{}, generation: map[int]int{}}
		w.jobs = append(w.jobs, jr)
		w.push(event{at: j.Arrival, kind: evArrive, job: jr})
	}
	for i := range wl.Failures {
		f := &wl.Failures[i]
		w.push(event{at: f.At, kind: evFail, failure: f})
		if f.RepairAfter > 0 {
			w.push(event{at: f.At + f.RepairAfter, kind: evRepair, failure: f})
		}
	}
	return w
}

// run processes events in time order until none is left or the next is
// past horizon (0: none); after the events of each instant the scheduler
// decides.
func (w *world) run(horizon time.Duration) error {
	for w.events.Len() > 0 && w.err == nil {
		at := w.events[0].at
		if horizon > 0 && at > horizon {
			break
		}
		w.advance(at)
		for w.events.Len() > 0 && w.events[0].at == at && w.err == nil {
			w.handle(heap.Pop(&w.events).(event))
		}
		if err := w.ctx.Err(); err != nil {
			return err
		}
		w.pass()
		w.rec.sample()
	}
	return w.err
}

func (w *world) advance(at time.Duration) {
	w.now = at
	w.clk.SetTime(Epoch.Add(at))
}

// Event kinds.
const (
	evArrive = iota
	evCreatePod
	evJobDone
	evPodDone
	evFail
	evRepair
	// evNoticeEnd: a victim given preemption notice acknowledges (it
	// saved) or its notice ends: it is evicted then.
	evNoticeEnd
	// evWake: a unit's preemption delay or short wait is over: it is
	// decided again.
	evWake
)

type event struct {
	at   time.Duration
	seq  int
	kind int
	job  *jobRun
	pod  *podRun
	// tmpl is the pod template index (evCreatePod); epoch the job's or
	// pod's run the event belongs to (a stale one is ignored).
	tmpl, epoch int
	failure     *workload.Failure
	// victim is the candidate an evNoticeEnd evicts, for preemptor;
	// preemptor also the unit an evWake wakes.
	victim    *preemption.Candidate
	preemptor *unitRun
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (w *world) push(e event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.events, e)
}

func (w *world) handle(e event) {
	switch e.kind {
	case evArrive:
		w.arrive(e.job)
	case evCreatePod:
		w.createPod(e.job, e.tmpl)
	case evJobDone:
		if e.job.epoch == e.epoch && e.job.state == stateRunning {
			w.completeJob(e.job)
		}
	case evPodDone:
		if pr := w.pods[e.pod.pod.UID]; pr == e.pod && pr.epoch == e.epoch && pr.node != "" {
			w.completePod(pr)
		}
	case evFail:
		w.fail(e.failure)
	case evRepair:
		w.repair(e.failure)
	case evNoticeEnd:
		w.noticeEnd(e)
	case evWake:
		if u := e.preemptor; u.wakeAt == e.at {
			u.wakeAt = 0
			u.touch(w)
		}
	}
}

// Job states.
const (
	stateNotArrived = iota
	// stateWaiting: arrived, not running (it may hold devices: a gang job
	// with some of its pods bound).
	stateWaiting
	// stateRunning: doing work — every pod a gang job needs runs, or at
	// least one pod of a job of independent pods does.
	stateRunning
	stateDone
)

// jobRun is a job as it goes.
type jobRun struct {
	spec  *workload.Job
	index int
	state int
	// pods are its pods that exist (pending or bound).
	pods map[types.UID]*podRun
	// groups are its PodGroups under this model; tree their root when
	// the model places them as a scheduling tree.
	groups []*groupRun
	tree   *treeRun
	// generation counts the pods made of each template (replacement
	// names).
	generation map[int]int
	// created and succeeded count the pods of a job of independent pods.
	created, succeeded int
	// bound counts its bound pods; devices what they hold.
	bound, devices int
	// epoch increases whenever the job starts or stops running: a
	// completion scheduled for an earlier run is stale.
	epoch    int
	runSince time.Duration
	// saved is the work its checkpoints kept: a run resumes there.
	saved time.Duration
	// noticeUntil: it was given preemption notice, evicted by then;
	// noticeOver: that notice is over and its run ended (its eviction
	// waits for its preemptor's other victims).
	noticeUntil time.Duration
	noticeOver  bool

	// What the report reads.
	started, done   bool
	startAt, doneAt time.Duration
	startSeq        int
	startNodes      []string
	restarts        int
	preempted       int
	preemptions     int
	workLostSeconds float64 // device-seconds of runs cut short by preemption
	firstBindAt     time.Duration
	everBound       bool
}

// podRun is one pod of a job.
type podRun struct {
	pod *corev1.Pod
	job *jobRun
	// tmpl is its template (job.spec.Pods index); group its PodGroup
	// under this model (nil: a unit of its own).
	tmpl  int
	group *groupRun
	unit  *unitRun
	// claims are the claims made for it (from templates, for extended
	// resources); shared are the named claims it uses.
	claims, shared []types.NamespacedName
	node           string
	devices        int
	epoch          int
	// demand and req are what it asks of a node (computed once).
	demand demand
	req    snapshot.Resources
}

// treeRun is the root CompositePodGroup of a job placed as a scheduling
// tree; its groups hang under it and share its unit.
type treeRun struct {
	root *lockv1.CompositePodGroup
	unit *unitRun
}

// groupRun is one PodGroup of a job under this model.
type groupRun struct {
	pg   *lockv1.PodGroup
	job  *jobRun
	unit *unitRun
	pods map[types.UID]*podRun
}

func (g *groupRun) podList() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(g.pods))
	for _, pr := range g.pods {
		out = append(out, pr.pod)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// arrive makes a job's groups and its first pods, as its controllers do.
func (w *world) arrive(j *jobRun) {
	w.rec.setState(j, stateWaiting)
	w.makeGroups(j)
	n := len(j.spec.Pods)
	for i := 0; i < n; i++ {
		if iv := j.spec.PodInterval; iv > 0 && i > 0 {
			w.push(event{at: w.now + time.Duration(i)*iv, kind: evCreatePod, job: j, tmpl: i})
			continue
		}
		w.createPod(j, i)
	}
}

// makeGroups makes a job's PodGroups as its integration creates them,
// each a unit — or, when the model places them as a scheduling tree, their
// root, one unit for all of them.
func (w *world) makeGroups(j *jobRun) {
	if root := w.m.tree(j.spec); root != nil {
		root = root.DeepCopy()
		root.CreationTimestamp = metav1.NewTime(w.clk.Now())
		root.UID = types.UID(fmt.Sprintf("cpg-%s-%s", root.Namespace, root.Name))
		j.tree = &treeRun{root: root}
		j.tree.unit = w.newUnit(queue.TreeKey(root.Namespace, root.Name).String(), j, nil, nil)
		j.tree.unit.tree = j.tree
		w.trees[types.NamespacedName{Namespace: root.Namespace, Name: root.Name}] = j.tree
	}
	for _, pg := range w.m.groups(j.spec) {
		pg = pg.DeepCopy()
		pg.CreationTimestamp = metav1.NewTime(w.clk.Now())
		pg.UID = types.UID(fmt.Sprintf("pg-%s-%s", pg.Namespace, pg.Name))
		g := &groupRun{pg: pg, job: j, pods: map[types.UID]*podRun{}}
		if j.tree != nil {
			g.unit = j.tree.unit
		} else {
			g.unit = w.newUnit(queue.GroupKey(pg.Namespace, pg.Name).String(), j, nil, g)
		}
		w.groups[types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}] = g
		j.groups = append(j.groups, g)
	}
}

// createPod makes the pod of template i (again, after a loss: a
// replacement of a new name).
func (w *world) createPod(j *jobRun, i int) {
	if j.state == stateDone {
		return
	}
	if !j.spec.Gang() {
		if j.created >= j.spec.Completions {
			return
		}
		j.created++
	}
	gen := j.generation[i]
	j.generation[i] = gen + 1
	p := j.spec.Pods[i].DeepCopy()
	if gen > 0 {
		p.Name = fmt.Sprintf("%s-r%d", p.Name, gen)
	}
	p.UID = types.UID(fmt.Sprintf("pod-%s-%s", p.Namespace, p.Name))
	p.CreationTimestamp = metav1.NewTime(w.clk.Now())
	p.Status.Phase = corev1.PodPending
	pr := &podRun{pod: p, job: j, tmpl: i}
	pr.demand, pr.req = w.demandOf(p)
	var group string
	if w.m.gangs && j.spec.GroupOf != nil {
		group = j.spec.GroupOf[i]
	}
	if group == "" {
		delete(p.Labels, lockv1.PodGroupLabel)
		p.Spec.SchedulingGroup = nil
	} else {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		if p.Spec.SchedulingGroup == nil {
			p.Labels[lockv1.PodGroupLabel] = group
		}
		pr.group = w.groups[types.NamespacedName{Namespace: p.Namespace, Name: group}]
	}
	w.makeClaims(pr)
	w.pods[p.UID] = pr
	j.pods[p.UID] = pr
	w.st.Cache.AddPod(p)
	if pr.group != nil {
		pr.group.pods[p.UID] = pr
		pr.group.unit.touch(w)
		return
	}
	pr.unit = w.newUnit(queue.PodKey(p.Namespace, p.Name).String(), j, pr, nil)
}

// makeClaims creates a pod's claims from its templates, as
// kube-controller-manager's resourceclaim controller does, and records
// them in the pod's status.
func (w *world) makeClaims(pr *podRun) {
	p := pr.pod
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			pr.shared = append(pr.shared, types.NamespacedName{Namespace: p.Namespace, Name: *rc.ResourceClaimName})
			continue
		}
		t := w.wl.ClaimTemplates[types.NamespacedName{Namespace: p.Namespace, Name: *rc.ResourceClaimTemplateName}]
		c := dra.ClaimFromTemplate(p, rc.Name, t, types.UID("claim-"+p.Namespace+"-"+p.Name+"-"+rc.Name))
		pr.claims = append(pr.claims, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
		w.putClaim(c)
	}
}

func (w *world) putClaim(c *resourcev1.ResourceClaim) {
	w.claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	w.st.Cache.AddClaim(c)
}

func (w *world) dropClaim(key types.NamespacedName) {
	if c := w.claims[key]; c != nil {
		delete(w.claims, key)
		w.st.Cache.DeleteClaim(c)
	}
}
