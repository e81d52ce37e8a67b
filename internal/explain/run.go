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
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Target names what to explain: kind is podgroup, pod, or a job kind
// (job, jobset, …: an alias of an integration).
type Target struct {
	Kind, Namespace, Name string
}

// unit is what the target resolves to.
type unit struct {
	label string
	group *lockv1.PodGroup
	// owner is the job (Job, JobSet, …) the target named, if any.
	owner jobintegration.GenericJob
	// notGang says why that job is not a gang.
	notGang string
	members []*corev1.Pod
	pending []*corev1.Pod
	bound   int
	// gated are members that still have scheduling gates: they exist but
	// are not candidates for a node.
	gated    int
	minCount int
	gang     bool
	priority int32
	// resolved is the unit as the scheduler resolves it.
	resolved *podgroup.Unit
}

// Run explains the target.
func Run(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, t Target) (*Report, error) {
	st, err := load(ctx, client, dyn)
	if err != nil {
		return nil, err
	}
	u, err := resolve(ctx, dyn, st, t)
	if err != nil {
		return nil, err
	}
	r := &Report{Unit: u.label, Gang: u.gang, MinCount: u.minCount, Members: len(u.members), Bound: u.bound, Pending: len(u.pending), Nodes: len(st.nodes)}
	if u.group != nil {
		r.Condition = meta.FindStatusCondition(u.group.Status.Conditions, lockv1.PodGroupInitiallyScheduled)
		r.State = meta.FindStatusCondition(u.group.Status.Conditions, lockv1.Running)
		r.Incarnation = incarnationOf(u.group)
		r.Topology = podgroup.TopologyKeys(u.group)
	}
	r.LastEvent = lastEvent(ctx, client, u)
	if len(u.pending) == 0 && r.State != nil && len(u.members) > 0 {
		r.Answer = fmt.Sprintf("%s is not pending: %s (%s)", u.label, r.State.Message, r.State.Reason)
		return r, nil
	}
	if answer := waitingAnswer(u); answer != "" {
		r.Answer = answer
		return r, nil
	}
	members, missing := r.claimStates(st, u)
	if missing != "" {
		r.Answer = fmt.Sprintf("%s is waiting: %s", u.label, missing)
		return r, nil
	}
	// The scheduler's own decision (decide.Decide) on a snapshot built as
	// its cache builds one; evidence reads a fresh one (a placed unit stays
	// in the first).
	cache := dra.NewCache()
	d := decide.Decide(ctx, st.snapshot(), cache, decide.Input{Unit: u.resolved, Priority: u.priority, Preemption: func() (*decide.Preemption, error) {
		return &decide.Preemption{Candidates: st.candidates(), PDBs: st.pdbs}, nil
	}})
	if d.Kind == decide.Error {
		r.Answer = fmt.Sprintf("%s cannot be evaluated (SchedulerError): %v", u.label, d.Err)
		return r, nil
	}
	evidence := st.snapshot()
	r.ExtendedResources = extendedResources(evidence, u.pending)
	r.Devices = classReports(ctx, st, evidence, cache, members, r.ExtendedResources)
	r.Holders = holders(st, u, r.Devices)
	switch {
	case d.Kind == decide.Bind && d.Outcome.Complete():
		r.Answer = fmt.Sprintf("%s fits now (%d of %d pending pods placeable): the scheduler places it on its next attempt", u.label, d.Result.Placeable, len(u.pending))
	case d.Kind == decide.Bind:
		r.Answer = fmt.Sprintf("%s is admitted now: the scheduler binds %d of its %d pending pods on its next attempt and the rest join as they fit: %s", u.label, d.Result.Placeable, len(u.pending), d.Summary)
		r.Reasons = waitingReasons(d.Outcome)
	case d.Kind == decide.Wait:
		r.Answer = fmt.Sprintf("%s is waiting: %s", u.label, d.Reason)
	default:
		r.Answer = fmt.Sprintf("%s is pending: %s", u.label, d.Summary)
		r.Reasons = waitingReasons(d.Outcome)
		r.Preemption = preemptionNote(d)
	}
	return r, nil
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
	return out
}

// candidates are the running units, as the scheduler lists them.
func (st *state) candidates() []preemption.Candidate {
	pods := make([]*corev1.Pod, 0, len(st.pods))
	for i := range st.pods {
		pods = append(pods, &st.pods[i])
	}
	return preemption.Candidates(pods, func(ns, name string) (*lockv1.PodGroup, int32) {
		g := st.groups[ns+"/"+name]
		if g == nil {
			return nil, 0
		}
		return g, st.groupPriority(g)
	})
}

// waitingAnswer covers the units that cannot be attempted at all.
func waitingAnswer(u *unit) string {
	switch {
	case len(u.members) == 0 && u.owner != nil && suspended(u.owner):
		return fmt.Sprintf("%s has no pods: %s %s is suspended (e.g. held by a queue such as Kueue); nothing is scheduled until it is resumed", u.label, u.owner.GVK().Kind, u.owner.Object().GetName())
	case len(u.members) == 0 && u.notGang != "":
		return fmt.Sprintf("%s has no pods yet, and is not a gang: %s", u.label, u.notGang)
	case len(u.members) == 0:
		return fmt.Sprintf("%s has no pods yet: 0 of minCount %d exist; create them (label %s=%s, schedulerName lockstep)", u.label, u.minCount, lockv1.PodGroupLabel, groupName(u))
	case u.gang && len(u.members) < u.minCount:
		return fmt.Sprintf("%s is waiting for pods: %d of minCount %d exist; no placement is attempted until minCount members exist", u.label, len(u.members), u.minCount)
	case u.gated > 0 && u.gang && len(u.pending)+u.bound < u.minCount:
		return fmt.Sprintf("%s is waiting for scheduling gates: %d members are gated (%s); none is placed until minCount %d are ungated", u.label, u.gated, u.resolved.GateList(), u.minCount)
	case u.gated > 0 && len(u.pending) == 0:
		return fmt.Sprintf("%s is waiting for scheduling gates (%s): a gated pod is not scheduled until its last gate is removed", u.label, u.resolved.GateList())
	case u.group == nil && groupName(u) != "":
		return fmt.Sprintf("%s waits for PodGroup %s/%s, which does not exist", u.label, u.members[0].Namespace, groupName(u))
	case len(u.pending) == 0:
		return fmt.Sprintf("%s is not pending: %d of %d pods are bound", u.label, u.bound, len(u.members))
	}
	return ""
}

func groupName(u *unit) string {
	if u.group != nil {
		return u.group.Name
	}
	if len(u.members) > 0 {
		return podgroup.GroupOf(u.members[0])
	}
	return ""
}

// claimStates resolves the pending pods' claims and records their state;
// missing explains a claim that does not exist yet.
func (r *Report) claimStates(st *state, u *unit) ([]placement.Member, string) {
	var members []placement.Member
	missing := ""
	for _, p := range u.pending {
		m := placement.Member{Pod: p}
		for _, pc := range p.Spec.ResourceClaims {
			name, ok := snapshot.ClaimName(p, pc)
			c := st.claim(p.Namespace, name)
			switch {
			case !ok || c == nil:
				r.Claims = append(r.Claims, ClaimState{Pod: p.Name, Claim: pc.Name, State: "not created yet (kube-controller-manager creates it from its ResourceClaimTemplate)"})
				if missing == "" {
					missing = fmt.Sprintf("the ResourceClaim %q of pod %s does not exist yet", pc.Name, p.Name)
				}
				continue
			case c.Status.Allocation != nil:
				r.Claims = append(r.Claims, ClaimState{Pod: p.Name, Claim: name, State: "allocated: " + devicesOf(c.Status.Allocation.Devices.Results)})
			default:
				r.Claims = append(r.Claims, ClaimState{Pod: p.Name, Claim: name, State: "pending (unallocated)"})
			}
			m.Claims = append(m.Claims, types.NamespacedName{Namespace: p.Namespace, Name: name})
		}
		members = append(members, m)
	}
	return members, missing
}

func lastEvent(ctx context.Context, client kubernetes.Interface, u *unit) string {
	name, ns := "", ""
	switch {
	case u.group != nil:
		name, ns = u.group.Name, u.group.Namespace
	case len(u.pending) > 0:
		name, ns = u.pending[0].Name, u.pending[0].Namespace
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
