package audit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// ref names a workload.
type ref struct {
	Namespace, APIVersion, Kind, Name string
	UID                               types.UID
}

// String is namespace/kind/name, the kind in lower case.
func (r ref) String() string { return r.Namespace + "/" + strings.ToLower(r.Kind) + "/" + r.Name }

// id names the workload: its ref, and for one gang of a job of several
// its gang (namespace/kind/name/gang).
func (w *workload) id() string {
	if w.gang != "" {
		return w.ref.String() + "/" + w.gang
	}
	return w.ref.String()
}

// workload is a set of pods that run together, before any timing.
type workload struct {
	ref  ref
	pods []*corev1.Pod
	// job is the integration's view of the owning job (nil: not a job of
	// an integrated kind, or the job no longer exists).
	job jobintegration.GenericJob
	// integrated: owned by a job of an integrated kind.
	integrated bool
	// group is the PodGroup a group of pods without a job names.
	group *lockv1.PodGroup
	// gang is the gang of a job made of several (split).
	gang string
	// required: pods it needs running or finished together; 0 is every
	// pod it had at once.
	required     int
	requiredFrom string
	verdict      Verdict
}

// independent are the controllers whose replicas do not need each other:
// a partial set of them is a smaller service, not a stuck one.
var independent = map[string]bool{"ReplicaSet": true, "DaemonSet": true, "ReplicationController": true, "Node": true}

// group sorts pods into workloads. skipped counts the pods left out, by the
// reason.
func group(ctx context.Context, pods []*corev1.Pod, objs objects, set jobintegration.Set, groups map[string]*lockv1.PodGroup) (out []*workload, skipped map[string]int) {
	byKey := map[ref]*workload{}
	skipped = map[string]int{}
	for _, p := range pods {
		r, integ, ok := ownerRef(ctx, p, objs, set, groups)
		if !ok {
			skipped[skipReason(p)]++
			continue
		}
		w := byKey[r]
		if w == nil {
			w = &workload{ref: r, integrated: integ != nil}
			if integ != nil {
				if obj := objs.lookup(integ.NewObject(), r.Namespace, r.Name); obj != nil && obj.GetUID() == r.UID {
					w.job = integ.Wrap(obj)
				}
			}
			if r.Kind == "PodGroup" {
				w.group = groups[r.Namespace+"/"+r.Name]
			}
			byKey[r] = w
			out = append(out, w)
		}
		w.pods = append(w.pods, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.String() < out[j].ref.String() })
	return out, skipped
}

// ownerRef is the workload a pod belongs to: the job of an integrated kind
// that owns it (integ set), else the PodGroup it names, else its
// controller unless that one's replicas are independent.
func ownerRef(ctx context.Context, p *corev1.Pod, objs objects, set jobintegration.Set, groups map[string]*lockv1.PodGroup) (ref, jobintegration.Integration, bool) {
	// objs never fails but with NotFound, which OwnerOf answers as "not
	// this kind's": an error leaves the pod to the rules below.
	if owner, err := set.OwnerOf(ctx, objs, p); err == nil && owner != nil {
		gvk := owner.Integration.GVK()
		return ref{Namespace: p.Namespace, APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.Name, UID: owner.UID}, owner.Integration, true
	}
	if g := podgroup.GroupOf(p); g != "" {
		apiVersion := lockv1.GroupVersion.String()
		if pg := groups[p.Namespace+"/"+g]; pg != nil && podgroup.Upstream(pg) || pg == nil && p.Labels[lockv1.PodGroupLabel] == "" {
			apiVersion = podgroup.UpstreamResource.GroupVersion().String()
		}
		return ref{Namespace: p.Namespace, APIVersion: apiVersion, Kind: "PodGroup", Name: g}, nil, true
	}
	c := metav1.GetControllerOf(p)
	if c == nil || independent[c.Kind] {
		return ref{}, nil, false
	}
	return ref{Namespace: p.Namespace, APIVersion: c.APIVersion, Kind: c.Kind, Name: c.Name, UID: c.UID}, nil, true
}

func skipReason(p *corev1.Pod) string {
	if c := metav1.GetControllerOf(p); c != nil {
		return "replicas of a " + c.Kind + " (independent: some of them running is not a partial start)"
	}
	return "pods without a controller or PodGroup (a pod alone cannot start partially)"
}

// judge sets how many pods the workload requires and whether Lockstep
// makes it gangs.
func (w *workload) judge(set jobintegration.Set) {
	switch {
	case w.job != nil:
		w.judgeJob(set)
	case w.integrated:
		w.requiredFrom = "every pod it had at once"
		w.verdict = Verdict{Reason: fmt.Sprintf("its %s could not be read (deleted, or not listable): not judged", w.ref.Kind)}
	case w.ref.Kind == "PodGroup":
		w.judgeGroup()
	default:
		w.requiredFrom = "every pod it had at once"
		w.verdict = Verdict{
			Reason: "a " + w.ref.Kind + " is not a kind Lockstep makes gangs of",
			Fix:    "create a PodGroup (scheduling.lockstep.dev/v1beta1) with a gang policy and label the pods " + lockv1.PodGroupLabel + ": <its name>, schedulerName: " + lockv1.SchedulerName,
		}
	}
}

// split divides a job made of several gangs (a LeaderWorkerSet's
// replicas, a JobSet with gang scope "role") into a workload per gang: each
// runs, or waits, on its own. Pods in no gang (a role of pods scheduled one
// by one) are one more workload whose pods are independent.
func (w *workload) split() []*workload {
	if w.job == nil {
		return []*workload{w}
	}
	groups, err := jobintegration.Groups(w.job)
	if err != nil || len(groups) < 2 {
		return []*workload{w}
	}
	byGang := map[string]*workload{}
	var out []*workload
	for _, p := range w.pods {
		g := jobintegration.GroupOf(w.job, groups, p)
		sub := byGang[g]
		if sub == nil {
			sub = &workload{ref: w.ref, integrated: true, job: w.job, verdict: w.verdict, gang: g,
				required: 1, requiredFrom: "its pods are in no gang: independent"}
			for _, gr := range groups {
				if gr.Name == g {
					sub.required, sub.requiredFrom = int(gr.MinCount), "the minCount of its gang"
				}
			}
			if g == "" {
				sub.gang = "(no gang)"
			}
			byGang[g] = sub
			out = append(out, sub)
		}
		sub.pods = append(sub.pods, p)
	}
	return out
}

// judgeJob judges a job of an integrated kind as the Job integration's
// reconciler would: the groups jobintegration.Groups makes of it.
func (w *workload) judgeJob(set jobintegration.Set) {
	j := w.job
	groups, err := jobintegration.Groups(j)
	switch {
	case err == nil:
		w.required, w.requiredFrom = 0, "the minCount of its gangs as Lockstep makes them"
		for _, g := range groups {
			w.required += int(g.MinCount)
		}
	case independentPods(j):
		w.required, w.requiredFrom = 1, "its pods are independent (completions ≠ parallelism)"
	default:
		if n := int(jobintegration.Size(j)); n > 0 {
			w.required, w.requiredFrom = n, "its size (pods it runs at once)"
		} else {
			w.requiredFrom = "every pod it had at once"
		}
	}
	w.verdict = jobVerdict(j, set, groups, err)
}

func jobVerdict(j jobintegration.GenericJob, set jobintegration.Set, groups []jobintegration.Group, err error) Verdict {
	lockstep := jobintegration.TargetsLockstep(j)
	switch {
	case jobintegration.InTreeGang(j):
		return Verdict{Gang: true, Already: true, Reason: "its in-tree gang policy (spec.scheduling): Lockstep schedules that group as a gang"}
	case err != nil:
		v := Verdict{Reason: err.Error()}
		var nq *jobintegration.NotQualified
		if errors.As(err, &nq) {
			v.Reason, v.Fix = nq.Condition, nq.Fix
		}
		if lockstep {
			v.Reason = "Lockstep schedules its pods one by one: " + v.Reason
		}
		return v
	case lockstep:
		if set.Gang(j) {
			return Verdict{Gang: true, Already: true, Reason: "scheduled by Lockstep as PodGroup " + groupNames(groups)}
		}
	}
	return Verdict{Gang: true, Reason: "would be PodGroup " + groupNames(groups) + " (minCount " + minCounts(groups) + ")",
		Fix: "set schedulerName: " + lockv1.SchedulerName + " on its pod templates"}
}

func groupNames(groups []jobintegration.Group) string {
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	return strings.Join(names, ", ")
}

func minCounts(groups []jobintegration.Group) string {
	var n []string
	for _, g := range groups {
		n = append(n, fmt.Sprint(g.MinCount))
	}
	return strings.Join(n, ", ")
}

// independentPods reports whether a batch/v1 Job's pods need not run
// together: a work queue (completions unset, parallelism > 1) or a fixed
// completion count other than its parallelism.
func independentPods(j jobintegration.GenericJob) bool {
	bj, ok := j.(*job.Job)
	if !ok {
		return false
	}
	p := bj.Size()
	c := bj.Spec.Completions
	indexed := bj.Spec.CompletionMode != nil && *bj.Spec.CompletionMode == batchv1.IndexedCompletion
	return p > 1 && (c == nil && !indexed || c != nil && *c != p)
}

// judgeGroup judges pods that name a PodGroup without a job of an
// integrated kind.
func (w *workload) judgeGroup() {
	pg := w.group
	switch {
	case pg == nil:
		w.requiredFrom = "every pod it had at once"
		w.verdict = Verdict{Reason: "its pods name PodGroup " + w.ref.Name + ", which does not exist", Fix: "create the PodGroup with a gang policy"}
	case podgroup.IsGang(pg):
		w.required, w.requiredFrom = podgroup.MinCount(pg), "its PodGroup's minCount"
		w.verdict = Verdict{Gang: true, Already: true, Reason: fmt.Sprintf("PodGroup %s, gang minCount %d: scheduled by Lockstep", pg.Name, podgroup.MinCount(pg))}
		if len(w.pods) > 0 && !podgroup.Ours(w.pods[0]) {
			w.verdict = Verdict{Gang: true, Reason: fmt.Sprintf("PodGroup %s, gang minCount %d: would be with schedulerName: %s", pg.Name, podgroup.MinCount(pg), lockv1.SchedulerName),
				Fix: "set schedulerName: " + lockv1.SchedulerName + " on its pods"}
		}
	default:
		w.required, w.requiredFrom = 1, "its PodGroup is basic: its pods are independent"
		w.verdict = Verdict{Reason: "PodGroup " + pg.Name + " has no gang policy", Fix: "set spec.schedulingPolicy.gang.minCount"}
	}
}
