package explain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Verdicts of a what-if.
const (
	// Fits: every unit of the job is admitted now.
	Fits = "Fits"
	// FitsAfterPreemption: the scheduler would preempt to make room.
	FitsAfterPreemption = "FitsAfterPreemption"
	// DoesNotFit: not now, and preemption cannot help.
	DoesNotFit = "DoesNotFit"
	// Waits: the scheduler would not try to place it yet (scheduling
	// gates, a missing object).
	Waits = "Waits"
)

// WhatIfReport answers for a job not yet created (`explain -f`): would it
// be placed now, where, after preempting what, or what blocks it — the
// scheduler's decision (decide.Decide, on the same view of the cluster
// Run decides from) for the pods and groups the job would make, with
// nothing written to the cluster.
type WhatIfReport struct {
	// Answer comes first: one sentence.
	Answer string `json:"answer"`
	// Job is what the manifest creates, e.g. "Job ml/train".
	Job     string `json:"job"`
	Verdict string `json:"verdict"`
	// Tree is the root CompositePodGroup its groups hang under, when the
	// scheduler places them as one tree.
	Tree string `json:"tree,omitempty"`
	// Units are what the scheduler would place, in the order it would.
	Units []WhatIfUnit `json:"units"`
	// Nodes is how many nodes the cluster has.
	Nodes int `json:"nodes"`
	// Preemption is what the scheduler's preemption search concludes for
	// the first unit that does not fit: the victims, or why it cannot help.
	Preemption string `json:"preemption,omitempty"`
	// Reasons are how many nodes fail each check for the first pod that
	// does not fit.
	Reasons []placement.ReasonCount `json:"reasons,omitempty"`
	Notes   []string                `json:"notes,omitempty"`
}

// WhatIfUnit is one group (or lone pod) of the job and where it would go.
type WhatIfUnit struct {
	// Name is e.g. "PodGroup ml/train" or "Pod ml/infer-0".
	Name      string `json:"name"`
	Pods      int    `json:"pods"`
	MinCount  int    `json:"minCount"`
	Placeable int    `json:"placeable"`
	// Where is the domain of each topology level the scheduler's decision
	// places it in ("example.com/rack=rack-3"), the values joined when
	// it spans several; empty without topology.
	Where []string `json:"where,omitempty"`
	// NodeCount is how many nodes its pods would be placed on.
	NodeCount int `json:"nodeCount"`
	// Blocked says what does not fit ("" when everything does).
	Blocked string `json:"blocked,omitempty"`
}

// WhatIfOptions are how a manifest is read.
type WhatIfOptions struct {
	// Namespace is the namespace of objects that name none.
	Namespace string
}

// WhatIf reads the manifests (one job of any kind Lockstep integrates, or
// a PodGroup with its pods, or a pod; with PriorityClasses,
// ResourceClaimTemplates and ResourceClaims it names that the cluster may
// lack) and answers for it as the scheduler would decide it now, on a
// watch of the cluster as Run reads it. Nothing is written.
func WhatIf(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, sources []workload.Source, opts WhatIfOptions) (*WhatIfReport, error) {
	existing, err := existingObjects(ctx, client)
	if err != nil {
		return nil, err
	}
	wl, err := workload.Load(sources, workload.LoadOptions{Live: true, Namespace: opts.Namespace, Existing: existing})
	if err != nil {
		return nil, err
	}
	j, err := oneJob(wl)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the watch load started
	st, err := load(ctx, client, dyn)
	if err != nil {
		return nil, err
	}
	r, err := st.whatIf(ctx, wl, j, time.Now())
	if err != nil {
		return nil, err
	}
	r.Notes = append(r.Notes, st.notes...)
	return r, nil
}

// existingObjects are the cluster's objects a manifest may name.
func existingObjects(ctx context.Context, client kubernetes.Interface) (workload.Existing, error) {
	var out workload.Existing
	pcs, err := client.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, fmt.Errorf("listing PriorityClasses (what a manifest's priorityClassName names): %w", err)
	}
	for i := range pcs.Items {
		out.PriorityClasses = append(out.PriorityClasses, &pcs.Items[i])
	}
	ts, err := client.ResourceV1().ResourceClaimTemplates("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, fmt.Errorf("listing ResourceClaimTemplates (what a manifest's pods name): %w", err)
	}
	for i := range ts.Items {
		out.ClaimTemplates = append(out.ClaimTemplates, &ts.Items[i])
	}
	cs, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, fmt.Errorf("listing ResourceClaims (what a manifest's pods name): %w", err)
	}
	for _, c := range cs.Items {
		out.Claims = append(out.Claims, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
	}
	return out, nil
}

// oneJob is the manifest's job: explain -f answers for one.
func oneJob(wl *workload.Workload) (*workload.Job, error) {
	if len(wl.Failures) > 0 {
		return nil, fmt.Errorf("%s is a simulation's failure, not something explain can create: remove it", wl.Failures[0].Ref())
	}
	switch len(wl.Jobs) {
	case 0:
		return nil, errors.New("the manifest creates nothing to schedule: give it a job (Job, JobSet, …), a PodGroup with its pods, or a pod")
	case 1:
		return wl.Jobs[0], nil
	}
	refs := make([]string, 0, len(wl.Jobs))
	for _, j := range wl.Jobs {
		refs = append(refs, j.Ref())
	}
	return nil, fmt.Errorf("explain -f answers for one job at a time; the manifest creates %d: %s", len(wl.Jobs), strings.Join(refs, ", "))
}

// whatIf decides the job on st, in memory: its pods and claims made as
// their controllers would make them, its units resolved as the scheduler
// resolves them, each decided (decide.Decide) on one snapshot in turn, so
// a later unit sees what an earlier one would take.
func (st *state) whatIf(ctx context.Context, wl *workload.Workload, j *workload.Job, now time.Time) (*WhatIfReport, error) {
	r := &WhatIfReport{Job: j.Ref(), Nodes: st.nodes, Notes: append([]string(nil), wl.Notes...)}
	for _, dc := range wl.DeviceClasses {
		r.Notes = append(r.Notes, fmt.Sprintf("DeviceClass %s of the manifest is not considered: the cluster's DeviceClasses are (create it first)", dc.Name))
	}
	pods := make([]*corev1.Pod, 0, len(j.Pods))
	for i, tmpl := range j.Pods {
		p := tmpl.DeepCopy()
		p.UID = types.UID("whatif-" + p.Namespace + "-" + p.Name)
		p.CreationTimestamp = metav1.NewTime(now)
		p.Status.Phase = corev1.PodPending
		// Lockstep's webhook makes a pod that names a PodGroup Lockstep's
		// when it names no other scheduler; a job's pods are Lockstep's
		// only when their template says so.
		if podgroup.GroupOf(p) != "" && p.Spec.SchedulerName == corev1.DefaultSchedulerName {
			p.Spec.SchedulerName = lockv1.SchedulerName
		}
		if !podgroup.Ours(p) {
			return nil, fmt.Errorf("the pods of %s are scheduled by %s (schedulerName), not Lockstep: set schedulerName: %s on its pod template for Lockstep to place it (explain -f answers for what Lockstep schedules)", j.Ref(), p.Spec.SchedulerName, lockv1.SchedulerName)
		}
		if g := groupOf(j, i); g != "" && p.Spec.SchedulingGroup == nil {
			if p.Labels == nil {
				p.Labels = map[string]string{}
			}
			p.Labels[lockv1.PodGroupLabel] = g
		}
		pods = append(pods, p)
	}
	for _, c := range wl.Claims {
		c = c.DeepCopy()
		c.UID = types.UID("whatif-" + c.Namespace + "-" + c.Name)
		st.cycle.Cache.AddClaim(c)
		defer st.cycle.Cache.DeleteClaim(c)
	}
	for _, p := range pods {
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName == nil {
				continue
			}
			t := wl.ClaimTemplates[types.NamespacedName{Namespace: p.Namespace, Name: *rc.ResourceClaimTemplateName}]
			c := dra.ClaimFromTemplate(p, rc.Name, t, types.UID("whatif-"+string(p.UID)+"-"+rc.Name))
			st.cycle.Cache.AddClaim(c)
			defer st.cycle.Cache.DeleteClaim(c)
		}
	}
	units, keys := whatIfUnits(j, pods)
	if j.Tree != nil {
		r.Tree = "CompositePodGroup " + j.Namespace + "/" + j.Tree.Name
	}
	for _, g := range j.Gangs {
		if st.groups[g.Namespace+"/"+g.Name] != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("PodGroup %s/%s exists already: this answers for the job as if it were new (`explain %s` answers for the one that exists)", g.Namespace, g.Name, strings.ToLower(j.Kind)+"/"+j.Name))
		}
	}
	snap := st.snapshot(ctx, keys[0], j.Priority)
	r.Verdict = Fits
	var blocked string
	for i, tu := range units {
		d := decide.Decide(ctx, snap, st.cycle.CEL, decide.Input{Unit: tu, Priority: j.Priority, Preemption: func() (*decide.Preemption, error) {
			return &decide.Preemption{Candidates: st.candidates(), PDBs: st.pdbs, Now: time.Now()}, nil
		}})
		r.Units = append(r.Units, whatIfLeaves(snap, d)...)
		if r.Verdict != Fits {
			continue
		}
		switch d.Kind {
		case decide.Bind:
			continue
		case decide.Preempt:
			r.Verdict = FitsAfterPreemption
		case decide.Wait:
			r.Verdict = Waits
			blocked = d.Reason
		case decide.Error:
			r.Verdict = DoesNotFit
			blocked = fmt.Sprintf("it cannot be evaluated (SchedulerError): %v", d.Err)
		default:
			r.Verdict = DoesNotFit
			blocked = d.Summary
		}
		if len(units) > 1 {
			blocked = fmt.Sprintf("%s (unit %d of %d)", blocked, i+1, len(units))
		}
		if d.Kind != decide.Wait {
			r.Preemption = preemptionNote(d)
		}
		for _, n := range d.Leaves() {
			if rs := waitingReasons(d.Leaf(n).Outcome); len(rs) > 0 {
				r.Reasons = rs
				break
			}
		}
	}
	r.Answer = whatIfAnswer(r, blocked)
	return r, nil
}

// groupOf is the group the job's pod i joins ("" none).
func groupOf(j *workload.Job, i int) string {
	if j.GroupOf == nil {
		return ""
	}
	return j.GroupOf[i]
}

// whatIfUnits are the units the scheduler would place the job's pods in,
// with their queue keys: its tree, each of its groups, or each pod.
func whatIfUnits(j *workload.Job, pods []*corev1.Pod) ([]*podgroup.TreeUnit, []string) {
	switch {
	case j.Tree != nil:
		composites := j.Composites
		if composites == nil {
			composites = []*lockv1.CompositePodGroup{j.Tree}
		}
		return []*podgroup.TreeUnit{podgroup.ResolveTree(j.Tree, composites, j.Gangs, pods, nil)},
			[]string{queue.TreeKey(j.Namespace, j.Tree.Name).String()}
	case len(j.Gangs) > 0:
		var units []*podgroup.TreeUnit
		var keys []string
		for _, g := range j.Gangs {
			var members []*corev1.Pod
			for _, p := range pods {
				if podgroup.GroupOf(p) == g.Name {
					members = append(members, p)
				}
			}
			units = append(units, podgroup.Single(podgroup.Resolve(g, g.Namespace, g.Name, members, nil)))
			keys = append(keys, queue.GroupKey(g.Namespace, g.Name).String())
		}
		return units, keys
	}
	units := make([]*podgroup.TreeUnit, 0, len(pods))
	keys := make([]string, 0, len(pods))
	for _, p := range pods {
		units = append(units, podgroup.Single(podgroup.ResolvePod(p, nil)))
		keys = append(keys, queue.PodKey(p.Namespace, p.Name).String())
	}
	return units, keys
}

// whatIfLeaves are the leaves of one decision as the report shows them:
// how many of each would be placed, and where.
func whatIfLeaves(snap *snapshot.Snapshot, d decide.Decision) []WhatIfUnit {
	if d.Root == nil {
		return nil
	}
	nodeOf := map[types.UID]string{}
	switch {
	case d.Kind == decide.Bind:
		for _, a := range d.Assignments() {
			nodeOf[a.Pod.UID] = a.Node
		}
	case d.Kind == decide.Preempt && d.Plan != nil:
		for _, a := range d.Plan.Placement.Assignments {
			nodeOf[a.Pod.UID] = a.Node
		}
	}
	keys := d.TopologyKeys()
	var out []WhatIfUnit
	for _, n := range d.Leaves() {
		l := d.Leaf(n)
		u := d.Nodes[n].Unit
		w := WhatIfUnit{Name: leafName(u), Pods: len(u.Pending), MinCount: u.MinCount()}
		nodes := map[string]bool{}
		values := map[string][]string{}
		for _, p := range u.Pending {
			node, ok := nodeOf[p.UID]
			if !ok {
				continue
			}
			w.Placeable++
			nodes[node] = true
			for _, k := range keys {
				v := "(none)"
				if ni := snap.Node(node); ni != nil {
					if lv, ok := ni.Node.Labels[k]; ok {
						v = lv
					}
				}
				if !slices.Contains(values[k], v) {
					values[k] = append(values[k], v)
				}
			}
		}
		w.NodeCount = len(nodes)
		for _, k := range keys {
			if vs := values[k]; len(vs) > 0 {
				sort.Strings(vs)
				w.Where = append(w.Where, k+"="+strings.Join(vs, ","))
			}
		}
		if w.Placeable < w.Pods {
			w.Blocked = l.Summary
		}
		out = append(out, w)
	}
	return out
}

// leafName names a leaf's unit: its PodGroup, or its lone pod.
func leafName(u *podgroup.Unit) string {
	if u.Group != nil {
		return "PodGroup " + u.Group.Namespace + "/" + u.Group.Name
	}
	if len(u.Pods) == 1 {
		return "Pod " + u.Pods[0].Namespace + "/" + u.Pods[0].Name
	}
	return "pods"
}

// whatIfAnswer words the verdict.
func whatIfAnswer(r *WhatIfReport, blocked string) string {
	placeable, pods := 0, 0
	var where []string
	for _, u := range r.Units {
		placeable, pods = placeable+u.Placeable, pods+u.Pods
		for _, w := range u.Where {
			if !slices.Contains(where, w) {
				where = append(where, w)
			}
		}
	}
	in := ""
	if len(where) > 0 {
		in = " in " + strings.Join(where, ", ")
	}
	switch r.Verdict {
	case Fits:
		if placeable < pods {
			return fmt.Sprintf("%s would start now if created: %d of its %d pods placeable%s, the rest join as they fit", r.Job, placeable, pods, in)
		}
		return fmt.Sprintf("%s would fit now if created: all %d pods placeable%s", r.Job, pods, in)
	case FitsAfterPreemption:
		return fmt.Sprintf("%s would fit if created, after the scheduler preempts: %s%s", r.Job, r.Preemption, in)
	case Waits:
		return fmt.Sprintf("%s would wait if created: %s", r.Job, blocked)
	}
	out := fmt.Sprintf("%s would not fit now if created: %s", r.Job, blocked)
	if r.Preemption != "" {
		out += "; preemption: " + r.Preemption
	}
	return out
}
