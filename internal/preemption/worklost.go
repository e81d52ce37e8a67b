package preemption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// workLost is the device-hours evicting c at now throws away: the
// devices its pods hold × the time since its last checkpoint
// (Checkpointed), or since its newest pod started when it reported none
// or an older one. Zero at a zero now (no clock).
func workLost(snap *snapshot.Snapshot, c Candidate, now time.Time) float64 {
	if now.IsZero() {
		return 0
	}
	since := c.lastSaved()
	if !now.After(since) {
		return 0
	}
	devices := 0
	for _, p := range c.Pods {
		devices += podDevices(snap, p)
	}
	return float64(devices) * now.Sub(since).Hours()
}

// podDevices counts the devices a pod holds: those its claims were
// allocated, or else the extended resources (nvidia.com/gpu, …) it
// requests.
func podDevices(snap *snapshot.Snapshot, p *corev1.Pod) int {
	return devicesHeld(p, podClaims(snap, p))
}

// devicesHeld counts the devices allocated to claims, or else, when none
// is, the extended resources pod p requests.
func devicesHeld(p *corev1.Pod, claims []*resourcev1.ResourceClaim) int {
	n := 0
	for _, c := range claims {
		if c.Status.Allocation != nil {
			n += len(c.Status.Allocation.Devices.Results)
		}
	}
	if n > 0 {
		return n
	}
	return extendedRequests(p)
}

// extended reports whether a resource is an extended resource (a device
// plugin's: a domain-qualified name outside kubernetes.io).
func extended(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/")
}

// WorkLost is the device-hours the plan's victims lose (Victims'
// workLost at the search's now).
func (p *Plan) WorkLost() float64 { return p.workLost }

// shortWait is a plan that evicts nothing, when a short wait costs less
// than plan: the candidates that declared they end soon (EndsBy within
// in.ShortWait, any priority) make room by some time T, and the devices
// the unit would hold × the wait until T are fewer device-hours than the
// victims would lose. Nil when no such wait exists. Candidates already
// going (plan.Terminating) are out of sim, as find left it.
func shortWait(snap *snapshot.Snapshot, sim *simulation, in Input, plan *Plan) (*Plan, error) {
	if in.ShortWait <= 0 || in.Now.IsZero() || plan.workLost <= 0 {
		return nil, nil
	}
	var soon []Candidate
	for _, c := range in.Candidates {
		if c.EndsBy.After(in.Now) && !c.EndsBy.After(in.Now.Add(in.ShortWait)) && !c.Terminating() && !stuck(c, in.Stuck) {
			soon = append(soon, c)
		}
	}
	if len(soon) == 0 {
		return nil, nil
	}
	sort.SliceStable(soon, func(i, j int) bool { return soon[i].EndsBy.Before(soon[j].EndsBy) })
	devices := placedDevices(plan.Placement)
	var removed []Candidate
	defer func() {
		for _, c := range removed {
			sim.restore(c)
		}
	}()
	for _, c := range soon {
		if float64(devices)*c.EndsBy.Sub(in.Now).Hours() >= plan.workLost {
			return nil, nil // waiting this long already costs more
		}
		sim.remove(c)
		removed = append(removed, c)
		res, ok, err := sim.fits()
		if err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		return &Plan{
			Terminating: append(append([]Candidate(nil), plan.Terminating...), removed...),
			Placement:   res, Considered: plan.Considered, Simulations: sim.fitChecks,
			WaitUntil: c.EndsBy,
			Instead:   fmt.Sprintf("%s, losing %.1f device-hours", plan.Describe(), plan.workLost),
		}, nil
	}
	return nil, nil
}

// placedDevices counts the devices a placement's pods hold: their
// claims', or else their extended resources.
func placedDevices(res placement.Result) int {
	n := 0
	for _, a := range res.Assignments {
		n += devicesHeld(a.Pod, a.Claims)
	}
	return max(n, 1)
}

// extendedRequests counts a pod's requests of extended resources.
func extendedRequests(p *corev1.Pod) int {
	n := 0
	for _, ctr := range p.Spec.Containers {
		for name, q := range ctr.Resources.Requests {
			if extended(name) {
				n += int(q.Value())
			}
		}
	}
	return n
}
