package preemption

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// NominationSlack is how long past its victims' grace period (or the
// declared end a short wait counts on) a nomination waits before the
// preemptor plans again.
const NominationSlack = 60 * time.Second

// Nomination is the capacity the plan frees, held for the preemptor (of
// priority prio) from now until its victims' longest grace period and
// NominationSlack have passed — or, for a short wait (WaitUntil), until
// NominationSlack past the declared end it waits for, if later.
func (p *Plan) Nomination(prio int32, now time.Time) *snapshot.Nomination {
	nom := &snapshot.Nomination{Priority: prio, Victims: map[types.UID]snapshot.Victim{}}
	for _, a := range p.Placement.Assignments {
		nom.Pods = append(nom.Pods, NominatedPod(a))
	}
	grace := int64(0)
	for _, c := range append(append([]Candidate(nil), p.Victims...), p.Terminating...) {
		for _, pod := range c.Pods {
			nom.Victims[pod.UID] = snapshot.Victim{Namespace: pod.Namespace, Name: pod.Name, Claims: snapshot.PodClaimNames(pod)}
			if g := gracePeriod(pod); g > grace {
				grace = g
			}
		}
	}
	nom.Deadline = now.Add(time.Duration(grace)*time.Second + NominationSlack)
	if until := p.WaitUntil.Add(NominationSlack); !p.WaitUntil.IsZero() && until.After(nom.Deadline) {
		nom.Deadline = until
	}
	return nom
}

// NominatedPod is what an assignment holds: its node and the claims it
// allocates (not those allocated already).
func NominatedPod(a placement.Assignment) snapshot.NominatedPod {
	np := snapshot.NominatedPod{Pod: a.Pod, Node: a.Node}
	for i, c := range a.Claims {
		if a.NewlyAllocated[i] {
			np.Claims = append(np.Claims, c)
		}
	}
	if a.Extended != nil {
		np.Claims = append(np.Claims, a.Extended.Claim)
	}
	return np
}

func gracePeriod(p *corev1.Pod) int64 {
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return *p.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}
