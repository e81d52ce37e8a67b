package explain

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/provision"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Target names what to explain: kind is podgroup, pod, or a job kind
// (job, jobset, …: an alias of an integration).
type Target struct {
	Kind, Namespace, Name string
}

// unit is what the target resolves to: the scheduler's unit
// (podgroup.Resolve) and what explain knows around it.
type unit struct {
	*podgroup.Unit
	label string
	// key is the scheduler's name for the unit (its queue key).
	key string
	// owner is the job (Job, JobSet, …) the target named, if any.
	owner jobintegration.GenericJob
	// notGang says why that job is not a gang; size is the job's size
	// when it has no group yet.
	notGang  string
	size     int
	priority int32
}

// Run explains the target.
func Run(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, t Target) (*Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the watch load started
	st, err := load(ctx, client, dyn)
	if err != nil {
		return nil, err
	}
	u, err := resolve(ctx, dyn, st, t)
	if err != nil {
		return nil, err
	}
	r := &Report{Unit: u.label, Gang: u.Gang(), MinCount: u.MinCount(), Members: len(u.Members), Bound: u.Bound, Pending: len(u.Pending), Nodes: st.nodes, Notes: st.notes}
	if u.Group != nil {
		r.Condition = meta.FindStatusCondition(u.Group.Status.Conditions, lockv1.PodGroupInitiallyScheduled)
		r.State = meta.FindStatusCondition(u.Group.Status.Conditions, lockv1.Running)
		r.Incarnation = incarnationOf(u.Group)
		r.LastRestart = meta.FindStatusCondition(u.Group.Status.Conditions, lockv1.DisruptionTarget)
		r.Topology = podgroup.TopologyKeys(u.Group)
	}
	r.LastEvent = lastEvent(ctx, client, u)
	r.DeviceHealth, r.HealthyDevices = deviceHealth(u.Pods)
	if answer := notScheduledAnswer(u, r.State, st.clusterQueueOf); answer != "" {
		r.Answer = answer
		return r, nil
	}
	members := r.claimStates(st, u)
	// The scheduler's own decision (decide.Decide of the unit, or of its
	// tree for a group in a tree: it never decides such a group alone) on the
	// scheduler's own view of the cycle (cycle.State); evidence reads the
	// same view again (a unit that fits stays placed in the first).
	var d decide.Decision
	var tr *treeRun
	if parent := parentOf(u); parent != "" {
		run := st.decideTree(ctx, st.compositesIn(u.Group.Namespace), u.Group.Namespace, parent)
		tr = &run
		r.Tree = run.label
		if answer, done := treeLeafAnswer(u, run); done {
			r.Answer = answer
			return r, nil
		}
		d = run.d.Leaf(run.leaf(u.Group.Name))
	} else {
		d = st.decide(ctx, u.key, podgroup.Single(u.Unit), u.priority)
	}
	if d.Kind == decide.Error {
		r.Answer = fmt.Sprintf("%s cannot be evaluated (SchedulerError): %v", u.label, d.Err)
		return r, nil
	}
	evidence := st.snapshot(ctx, u.key, u.priority)
	r.ExtendedResources = extendedResources(evidence, u.Pending)
	r.Devices = classReports(ctx, st, evidence, st.cycle.CEL, members, r.ExtendedResources)
	r.Holders = holders(st, u, r.Devices)
	classes := make([]string, 0, len(r.Devices))
	for _, c := range r.Devices {
		classes = append(classes, c.Class)
	}
	if r.TopologyDomains, err = topologyReport(ctx, evidence, st.cycle.CEL, d, classes); err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("the topology domains could not be evaluated: %v", err))
	}
	r.Answer = decisionAnswer(u, d)
	if tr != nil {
		r.Answer = fmt.Sprintf("%s is a group of the scheduling tree %s, which the scheduler places as one unit: %s", u.label, tr.label, tr.answer)
	}
	switch d.Kind {
	case decide.Bind:
		r.Reasons = waitingReasons(d.Outcome)
	case decide.Unschedulable, decide.Preempt:
		r.Reasons = waitingReasons(d.Outcome)
		r.Preemption = preemptionNote(d)
		if tr == nil && len(u.Members) > 1 {
			r.MoreNodes = strings.TrimPrefix(provision.NodeShortfall(ctx, st.cycle, u.key, podgroup.Single(u.Unit), u.priority, nil), "more nodes would make it fit: ")
		}
	}
	return r, nil
}

// parentOf is the CompositePodGroup the unit's group hangs under ("" for
// a flat group or a lone pod).
func parentOf(u *unit) string {
	if u.Group == nil {
		return ""
	}
	return podgroup.ParentOf(u.Group)
}

// treeLeafAnswer answers for a group of a tree whose decision has no leaf
// for it — no root, nothing pending, or a tree that waits before placement —
// with the tree's own answer (done); otherwise the leaf's decision is
// reported as a flat group's would be, under the tree's answer.
func treeLeafAnswer(u *unit, tr treeRun) (string, bool) {
	if tr.root != nil && tr.decided && tr.leaf(u.Group.Name) != nil {
		return "", false
	}
	if tr.root == nil {
		return fmt.Sprintf("%s is not scheduled: it hangs under %s, which has no root: %s", u.label, tr.label, tr.answer), true
	}
	return fmt.Sprintf("%s is a group of the scheduling tree %s, which the scheduler places as one unit: %s", u.label, tr.label, tr.answer), true
}

// decisionAnswer words the scheduler's decision for the unit.
func decisionAnswer(u *unit, d decide.Decision) string {
	switch {
	case d.Kind == decide.Wait && u.Gang() && len(u.Members) < u.MinCount() && d.WaitReason == "":
		// The decision's reason, with the count the scheduler leaves out
		// of conditions (it would be rewritten with every member created).
		return fmt.Sprintf("%s is waiting for pods: %d of minCount %d exist; none is placed until %d do", u.label, len(u.Members), u.MinCount(), u.MinCount())
	case d.Kind == decide.Wait:
		return fmt.Sprintf("%s is waiting: %s", u.label, d.Reason)
	case d.Kind == decide.Bind && d.Outcome.Complete():
		return fmt.Sprintf("%s fits now (%d of %d pending pods placeable): the scheduler places it on its next attempt", u.label, d.Result.Placeable, len(u.Pending))
	case d.Kind == decide.Bind:
		return fmt.Sprintf("%s is admitted now: the scheduler binds %d of its %d pending pods on its next attempt and the rest join as they fit: %s", u.label, d.Result.Placeable, len(u.Pending), d.Summary)
	}
	return fmt.Sprintf("%s is pending: %s", u.label, d.Summary)
}

// preemptionNote is what the scheduler's preemption search concludes, as
// explain words it.
func preemptionNote(d decide.Decision) string {
	plan := d.Plan
	switch {
	case d.Kind == decide.Unschedulable:
		return strings.TrimPrefix(d.Reason, "preemption ")
	case plan == nil:
		return d.Reason
	case len(plan.Victims) == 0:
		return fmt.Sprintf("would wait for %d lower-priority units already terminating", len(plan.Terminating))
	}
	out := fmt.Sprintf("would evict %s", plan.Describe())
	if len(plan.ViolatedPDBs) > 0 {
		out += fmt.Sprintf(" (violating PodDisruptionBudget %s: no other choice)", strings.Join(plan.ViolatedPDBs, ", "))
	}
	out += fmt.Sprintf(", losing %s", deviceHours(plan.WorkLost()))
	if alt := plan.Alternatives; len(alt) > 0 {
		var parts []string
		for i, a := range alt {
			if i == 3 {
				parts = append(parts, fmt.Sprintf("and %d more", len(alt)-3))
				break
			}
			parts = append(parts, fmt.Sprintf("in %s %s, losing %s", a.Domain, a.Victims, deviceHours(a.WorkLost)))
		}
		out += "; costlier: " + strings.Join(parts, "; ")
	}
	return out
}

// deviceHours words work lost: "3.2 device-hours since their last
// checkpoints".
func deviceHours(h float64) string {
	return fmt.Sprintf("%.1f device-hours since their last checkpoints", h)
}

// decide is the scheduler's decision for the unit (a flat one, or a tree)
// named key, on the scheduler's view of the cycle (cycle.State), with
// preemption considered as the scheduler considers it.
func (st *state) decide(ctx context.Context, key string, tu *podgroup.TreeUnit, prio int32) decide.Decision {
	return decide.Decide(ctx, st.snapshot(ctx, key, prio), st.cycle.CEL, decide.Input{Unit: tu, Priority: prio, Preemption: func() (*decide.Preemption, error) {
		return &decide.Preemption{Candidates: st.candidates(), PDBs: st.pdbs, Now: time.Now()}, nil
	}})
}

// candidates are the running units, as the scheduler lists them (a victim
// tree whole).
// A group's minimum runtime (lockv1.MinRuntimeAnnotation) spares it, and
// the answer says until when; the scheduler's per-PriorityClass defaults
// (--min-runtime, --preemption-notice) are its flags, which explain does
// not see.
func (st *state) candidates() []preemption.Candidate {
	cands := preemption.TreeCandidates(st.pods, func(ns, name string) (*lockv1.PodGroup, int32) {
		g := st.groups[ns+"/"+name]
		if g == nil {
			return nil, 0
		}
		return g, st.groupPriority(g)
	}, func(ns, name string) *lockv1.CompositePodGroup { return st.composites[ns+"/"+name] })
	preemption.Declare(cands, nil)
	return cands
}

// notScheduledAnswer covers what the scheduler has no decision for: a
// target with no pods at all (a job not started, suspended — by Kueue,
// naming the ClusterQueue cq says, as the integrity controller does — or
// not a gang), and a unit with nothing to place and nothing to wait for.
func notScheduledAnswer(u *unit, state *metav1.Condition, cq podgroup.ClusterQueueOf) string {
	held := ""
	if len(u.Pods) == 0 && u.owner != nil {
		held = jobintegration.KueueHeld(u.owner, cq)
	}
	switch {
	case held != "":
		return fmt.Sprintf("%s has no pods: %s %s is suspended, %s; nothing is scheduled until Kueue admits it", u.label, u.owner.GVK().Kind, u.owner.Object().GetName(), held)
	case len(u.Pods) == 0 && u.owner != nil && suspended(u.owner):
		return fmt.Sprintf("%s has no pods: %s %s is suspended (e.g. held by a queue such as Kueue); nothing is scheduled until it is resumed", u.label, u.owner.GVK().Kind, u.owner.Object().GetName())
	case len(u.Pods) == 0 && u.notGang != "":
		return fmt.Sprintf("%s has no pods yet, and is not a gang: %s", u.label, u.notGang)
	case len(u.Pods) == 0 && u.Group == nil && u.size > 0:
		return fmt.Sprintf("%s has no pods and no PodGroup yet: its controller has not created them (%d pods expected)", u.label, u.size)
	case len(u.Pods) == 0 && u.Group != nil:
		return fmt.Sprintf("%s has no pods yet: 0 of minCount %d exist; create them (label %s=%s, schedulerName lockstep)", u.label, u.MinCount(), lockv1.PodGroupLabel, u.Group.Name)
	case len(u.Pending) > 0 || u.Waiting != "":
		return ""
	case state != nil && len(u.Members) > 0:
		return fmt.Sprintf("%s is not pending: %s (%s)", u.label, state.Message, state.Reason)
	}
	return fmt.Sprintf("%s is not pending: %d of %d pods are bound", u.label, u.Bound, len(u.Members))
}

// claimStates records the state of the pending pods' claims and returns
// the members whose claims all exist (what the scheduler places); a claim
// that does not exist yet is what the unit waits for (the decision says so).
func (r *Report) claimStates(st *state, u *unit) []placement.Member {
	var members []placement.Member
	for _, p := range u.Pending {
		m := placement.Member{Pod: p}
		complete := true
		for _, pc := range p.Spec.ResourceClaims {
			name, ok := snapshot.ClaimName(p, pc)
			c := st.claim(p.Namespace, name)
			switch {
			case !ok || c == nil:
				r.Claims = append(r.Claims, ClaimState{Pod: p.Name, Claim: pc.Name, State: "not created yet (kube-controller-manager creates it from its ResourceClaimTemplate)"})
				complete = false
				continue
			case c.Status.Allocation != nil:
				r.Claims = append(r.Claims, ClaimState{Pod: p.Name, Claim: name, State: "allocated: " + devicesOf(c.Status.Allocation.Devices.Results)})
			default:
				r.Claims = append(r.Claims, ClaimState{Pod: p.Name, Claim: name, State: "pending (unallocated)"})
			}
			m.Claims = append(m.Claims, types.NamespacedName{Namespace: p.Namespace, Name: name})
		}
		if complete {
			members = append(members, m)
		}
	}
	return members
}

// deviceHealth is what the pods' kubelets report of their devices: the
// devices not Healthy, and how many are.
func deviceHealth(pods []*corev1.Pod) ([]dra.DeviceHealth, int) {
	var out []dra.DeviceHealth
	healthy := 0
	for _, p := range pods {
		for _, d := range dra.PodDeviceHealth(p) {
			if d.Health == corev1.ResourceHealthStatusHealthy {
				healthy++
				continue
			}
			out = append(out, d)
		}
	}
	return out, healthy
}

func lastEvent(ctx context.Context, client kubernetes.Interface, u *unit) string {
	name, ns := "", ""
	switch {
	case u.Group != nil:
		name, ns = u.Group.Name, u.Group.Namespace
	case len(u.Pending) > 0:
		name, ns = u.Pending[0].Name, u.Pending[0].Namespace
	default:
		return ""
	}
	evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	sort.Slice(evs.Items, func(i, j int) bool { return eventTime(&evs.Items[i]).Time.Before(eventTime(&evs.Items[j]).Time) })
	e := evs.Items[len(evs.Items)-1]
	return fmt.Sprintf("%s %s: %s", e.Type, e.Reason, strings.TrimSpace(e.Message))
}

func eventTime(e *corev1.Event) metav1.Time {
	if !e.EventTime.IsZero() {
		return metav1.Time{Time: e.EventTime.Time}
	}
	return e.LastTimestamp
}

func incarnationOf(pg *lockv1.PodGroup) *Incarnation {
	inc := pg.Status.Incarnation
	if inc == nil {
		return nil
	}
	out := &Incarnation{Number: inc.Number, Members: len(inc.Members), BoundTime: inc.BoundTime.UTC().Format(time.RFC3339)}
	for _, m := range inc.Members {
		switch m.Outcome {
		case lockv1.MemberSucceeded:
			out.Succeeded++
		case lockv1.MemberRemoved:
			out.Removed++
		}
	}
	if inc.Ended != nil {
		out.Ended = inc.Ended.Reason + ": " + inc.Ended.Message
	}
	return out
}

func suspended(j jobintegration.GenericJob) bool {
	_, _, s := j.Stopped()
	return s
}

// waitingReasons are the node counts per reason of the first member that
// found no node.
func waitingReasons(o placement.Outcome) []placement.ReasonCount {
	for _, f := range o.Waiting {
		if !f.ForGang() {
			return f.Diagnosis.Top()
		}
	}
	return nil
}
