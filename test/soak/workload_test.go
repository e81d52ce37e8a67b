//go:build soak

package soak

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// fate is what the soak makes of a gang.
type fate string

const (
	fateSucceed fate = "succeed" // ranks exit 0 at different times
	fateFail    fate = "fail"    // one rank exits 1
	fateUrgent  fate = "urgent"  // high priority: preempts lower gangs, then succeeds
	fateNode    fate = "node"    // runs long; a node under it may be deleted
)

// gangSpec is one generated Job.
type gangSpec struct {
	name    string
	ranks   int
	fate    fate
	created time.Time
}

// registry remembers every generated Job, by name.
type registry struct {
	mu    sync.Mutex
	gangs map[string]*gangSpec
}

func (r *registry) add(g *gangSpec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gangs == nil {
		r.gangs = map[string]*gangSpec{}
	}
	r.gangs[g.name] = g
}

func (r *registry) get(name string) *gangSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gangs[name]
}

func (r *registry) count() map[fate]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[fate]int{}
	for _, g := range r.gangs {
		out[g.fate]++
	}
	return out
}

// newGang draws a gang: 2–8 ranks of one GPU; most succeed, some fail, some
// are urgent, some run long enough to meet a node loss.
func newGang(rng *rand.Rand, i int) *gangSpec {
	g := &gangSpec{name: fmt.Sprintf("g%03d", i), ranks: 2 + rng.IntN(11)}
	switch x := rng.IntN(100); {
	case x < 55:
		g.fate = fateSucceed
	case x < 70:
		g.fate = fateFail
	case x < 85:
		g.fate = fateUrgent
	default:
		g.fate = fateNode
	}
	if g.fate == fateUrgent {
		g.ranks = 12 + rng.IntN(13) // big enough to need a preemption on a busy cluster
	}
	return g
}

// job renders a gang as a Lockstep gang Job with the timings of its fate.
func (g *gangSpec) job(rng *rand.Rand, ns string) *batchv1.Job {
	durations := make([]string, g.ranks)
	for i := range durations {
		durations[i] = fmt.Sprintf("%ds", 5+rng.IntN(26))
	}
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu")
	switch g.fate {
	case fateSucceed, fateUrgent:
		pod = pod.Annotation("sim.lockstep.dev/succeed-after-by-index", strings.Join(durations, ","))
	case fateFail:
		for i := range durations {
			durations[i] = "1h"
		}
		durations[rng.IntN(g.ranks)] = fmt.Sprintf("%ds", 5+rng.IntN(26))
		pod = pod.Annotation("sim.lockstep.dev/fail-after-by-index", strings.Join(durations, ","))
	case fateNode:
		for i := range durations {
			durations[i] = fmt.Sprintf("%ds", 30+rng.IntN(31))
		}
		pod = pod.Annotation("sim.lockstep.dev/succeed-after-by-index", strings.Join(durations, ","))
	}
	p := pod.Obj()
	p.Spec.PriorityClassName = classLow
	if g.fate == fateUrgent {
		p.Spec.PriorityClassName = classHigh
	}
	job := builders.IndexedJob(ns, g.name, int32(g.ranks), p)
	job.Spec.BackoffLimit = nil
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}}}
	return job
}

// Priority classes of the soak.
const (
	classLow  = "soak-low"  // 100
	classHigh = "soak-high" // 10000
)

// finished reports whether a Job is Complete or Failed.
func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
