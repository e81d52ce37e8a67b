package audit

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PreemptedReason is the reason of the event a scheduler records on a pod
// it preempts.
const PreemptedReason = "Preempted"

// estGone is the estimate a span of a gone pod rests on.
const estGone = "a preempted pod that is gone (known from its Preempted event) is taken to have held its node since its workload's first pod was created, with the devices its replacement asks for"

// attributeEvents ties the Preempted events of pods to the spans of the
// workloads: a pod still there gets the event as its takedown (unless its
// DisruptionTarget condition says it already); a pod that is gone becomes
// a span of the workload one of whose pods has its name (a StatefulSet's
// pod comes back under its name) or its generateName (a Job's rank's
// replacement: generateName plus 5 characters). It returns how many
// events could be tied to no workload.
func attributeEvents(as []*analysis, evs []*corev1.Event) (unattributed int) {
	byUID := map[types.UID]*span{}
	for _, a := range as {
		for _, s := range a.spans {
			byUID[s.pod.UID] = s
		}
	}
	seen := map[string]bool{}
	for _, e := range evs {
		o := e.InvolvedObject
		key := o.Namespace + "/" + o.Name + "/" + string(o.UID)
		if e.Reason != PreemptedReason || o.Kind != "Pod" || seen[key] {
			continue
		}
		seen[key] = true
		td := &takedown{at: eventTime(e), reason: PreemptedReason, message: e.Message, source: "event"}
		if s := byUID[o.UID]; s != nil {
			if s.takedown == nil {
				td.attributedBy = "uid"
				s.takedown = td
			}
			continue
		}
		a, sibling := byName(as, o.Namespace, o.Name)
		if a == nil {
			unattributed++
			continue
		}
		td.attributedBy = "name"
		a.spans = append(a.spans, goneSpan(a, sibling, o, td))
	}
	return unattributed
}

// goneSpan stands for a pod that is gone: from its workload's first
// creation it held the devices sibling asks for, until its takedown.
func goneSpan(a *analysis, sibling *span, o corev1.ObjectReference, td *takedown) *span {
	from := td.at
	for _, s := range a.spans {
		if s.created.Before(from) {
			from = s.created
		}
	}
	end := td.at
	p := sibling.pod.DeepCopy()
	p.Name, p.UID, p.Status = o.Name, o.UID, corev1.PodStatus{Phase: corev1.PodFailed}
	s := &span{pod: p, created: from, bound: &from, end: &end, extended: sibling.extended, takedown: td, gone: true, estimated: []string{estGone}}
	for _, c := range sibling.claims {
		s.claims = append(s.claims, claimUse{key: "gone/" + string(o.UID) + "/" + o.Name + "/" + c.key, devices: c.devices})
	}
	return s
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	}
	return e.FirstTimestamp.Time
}

// byName is the workload (and its pod) a gone pod's name ties it to.
func byName(as []*analysis, ns, name string) (*analysis, *span) {
	for _, a := range as {
		if a.w.ref.Namespace != ns {
			continue
		}
		for _, s := range a.spans {
			gn := s.pod.GenerateName
			if s.pod.Name == name || gn != "" && strings.HasPrefix(name, gn) && len(name) == len(gn)+5 {
				return a, s
			}
		}
	}
	return nil, nil
}

// findPreemptions records, on each workload, the takedowns of its pods
// that left it partly alive.
func findPreemptions(as []*analysis, grace time.Duration) {
	for _, a := range as {
		for _, s := range a.spans {
			if s.takedown == nil {
				continue
			}
			if p, ok := a.judgeTakedown(s, grace); ok {
				a.preemptions = append(a.preemptions, p)
			}
		}
		sort.SliceStable(a.preemptions, func(i, j int) bool { return a.preemptions[i].At.Before(a.preemptions[j].At) })
	}
}

// judgeTakedown reports the victim's takedown if it left the workload
// partly alive: once the victim was gone (or at the takedown, while it
// still terminates), siblings held their nodes, were not taken down with
// it (within grace), kept running past grace, held devices, and were
// fewer than the workload requires.
func (a *analysis) judgeTakedown(victim *span, grace time.Duration) (Preemption, bool) {
	td := victim.takedown
	from := td.at
	if victim.end != nil && victim.end.After(from) {
		from = *victim.end
	}
	survivors, held, refs := 0, devices{}, map[string]int{}
	for _, s := range a.spans {
		with := s.takedown != nil && absDuration(s.takedown.at.Sub(td.at)) <= grace
		if s == victim || with || !s.holdingAt(from) || s.end != nil && !s.end.After(from.Add(grace)) {
			continue
		}
		survivors++
		s.devicesWith(held, refs, +1)
	}
	if survivors == 0 || len(held) == 0 || survivors+doneAt(a.spans, from) >= a.required {
		return Preemption{}, false
	}
	return Preemption{
		Pod: victim.pod.Name, Reason: td.reason, Message: td.message, At: td.at, Survivors: survivors,
		DeviceHoursHeldAfter: round(heldAfter(a.segs, from, a.required) / 3600),
		Source:               td.source, AttributedBy: td.attributedBy,
	}, true
}

func doneAt(spans []*span, t time.Time) int {
	n := 0
	for _, s := range spans {
		if s.succeeded && s.end != nil && !s.end.After(t) {
			n++
		}
	}
	return n
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
