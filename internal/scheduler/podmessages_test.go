package scheduler

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A report builds a gang's gang-wide message once, and never hands it to a
// member that speaks for itself: whatever the order of the failures (the
// gang-wide one first or last), each member gets exactly podMessage's
// message — below minCount all the same, beyond it each its own cause.
func TestPodMessagesGiveEachMemberItsOwn(t *testing.T) {
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: fmt.Sprint("train-", i)}}
	}
	forGang := func(i int) placement.Failure { return placement.Failure{Pod: pod(i)} }
	own := func(i int, reason string) placement.Failure {
		return placement.Failure{Pod: pod(i), Diagnosis: placement.Diagnosis{Nodes: 2, Reasons: map[string]int{reason: 2}}}
	}
	g := &group{Unit: &podgroup.Unit{Group: builders.GangPodGroup("ml", "train", 2)}}
	for _, tc := range []struct {
		name     string
		outcome  placement.Outcome
		failures []placement.Failure
		distinct int // messages expected among the failures
	}{{
		name:     "below minCount: one message for all",
		outcome:  placement.Outcome{Gang: true, MinCount: 4, Fit: 1, Total: 4},
		failures: []placement.Failure{own(0, "Insufficient cpu"), forGang(1), own(2, "Insufficient memory")},
		distinct: 1,
	}, {
		name:     "minCount met, the gang's message first",
		outcome:  placement.Outcome{Gang: true, MinCount: 2, Fit: 2, Total: 5},
		failures: []placement.Failure{forGang(0), own(1, "Insufficient cpu"), forGang(2), own(3, "Insufficient memory")},
		distinct: 3,
	}, {
		name:     "minCount met, own causes first",
		outcome:  placement.Outcome{Gang: true, MinCount: 2, Fit: 2, Total: 5},
		failures: []placement.Failure{own(0, "Insufficient cpu"), own(1, "Insufficient memory"), forGang(2)},
		distinct: 3,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide.Decision{Kind: decide.Unschedulable, Outcome: tc.outcome}
			message := podMessages(g, d, "a note")
			seen := map[string]bool{}
			for _, f := range tc.failures {
				got, want := message(f), podMessage(g, d, f, "a note")
				if got != want {
					t.Errorf("%s: %q, want %q", f.Pod.Name, got, want)
				}
				seen[got] = true
			}
			if len(seen) != tc.distinct {
				t.Errorf("%d distinct messages, want %d: %v", len(seen), tc.distinct, seen)
			}
		})
	}
}
