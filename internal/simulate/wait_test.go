package simulate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// On 3 nodes × 2 GPUs, research (2 GPUs, 4h) runs from the start and
// two evals (2 GPUs each, declared to end within 30m) from 30m and 31m;
// production (4 GPUs) arrives at 58m and late research (2 GPUs) at 59m.
// With the scheduler's short wait, production waits the 3 minutes for
// the evals' declared ends rather than throw away their work, and what
// the first eval frees is held for it: late does not take it. Without the
// short wait (or one shorter than the wait) it preempts both evals at
// once. A preemption delay holds production back without holding
// anything for it (late takes the first eval's GPUs, and production
// preempts late when the delay ends); the group's own delay wins over
// the PriorityClass's.
func TestShortWaitAndPreemptionDelay(t *testing.T) {
	cl := cluster(t, gpus3x2)
	lockstep := lockstepOnly(t)
	type want struct {
		Fates      []string
		LostHours  float64
		ShortWaits int
	}
	preemptedAt := func(at string, lost float64) want {
		return want{LostHours: lost, Fates: []string{
			"Job ml/research 0s→4h0m0s worker-0 ×2",
			// The evals run again once production is done, late after them.
			"Job ml/eval-a 30m0s→" + map[string]string{"58m": "2h28m0s", "59m": "2h29m0s"}[at] + " worker-1 ×2",
			"Job ml/eval-b 31m0s→" + map[string]string{"58m": "2h28m0s", "59m": "2h29m0s"}[at] + " worker-2 ×2",
			"Job ml/production " + at + "0s→" + map[string]string{"58m": "1h58m0s", "59m": "1h59m0s"}[at] + " worker-1 ×2, worker-2 ×2",
			"Job ml/late " + map[string]string{"58m": "2h28m0s→2h58m0s", "59m": "2h29m0s→2h59m0s"}[at] + " worker-1 ×2",
		}}
	}
	for _, tc := range []struct {
		name      string
		prodTerms string
		opts      Options
		want      want
	}{
		{name: "short wait for declared ends", opts: Options{PreemptionShortWait: 5 * time.Minute}, want: want{ShortWaits: 1, Fates: []string{
			"Job ml/research 0s→4h0m0s worker-0 ×2",
			"Job ml/eval-a 30m0s→1h0m0s worker-1 ×2",
			"Job ml/eval-b 31m0s→1h1m0s worker-2 ×2",
			"Job ml/production 1h1m0s→2h1m0s worker-1 ×2, worker-2 ×2",
			"Job ml/late 2h1m0s→2h31m0s worker-1 ×2",
		}}},
		{name: "no short wait", want: preemptedAt("58m", 1.8333)},
		{name: "declared ends beyond the short wait", opts: Options{PreemptionShortWait: 2 * time.Minute}, want: preemptedAt("58m", 1.8333)},
		{name: "preemption delay by PriorityClass", opts: Options{PreemptionDelay: map[string]time.Duration{"production": 10 * time.Minute}}, want: want{LostHours: 0.2667, Fates: []string{
			"Job ml/research 0s→4h0m0s worker-0 ×2",
			"Job ml/eval-a 30m0s→1h0m0s worker-1 ×2",
			"Job ml/eval-b 31m0s→1h1m0s worker-2 ×2",
			"Job ml/production 1h8m0s→2h8m0s worker-1 ×2, worker-2 ×2",
			// Preempted at 1h8m, 8 minutes in; run again after production.
			"Job ml/late 1h0m0s→2h38m0s worker-1 ×2",
		}}},
		{name: "the group's delay wins", prodTerms: ", scheduling.lockstep.dev/preemption-delay: 1m", opts: Options{PreemptionDelay: map[string]time.Duration{"production": 10 * time.Minute}},
			want: preemptedAt("59m", 1.9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := priorities + oneGPU +
				rankJob("research", 2, "research", "sim.lockstep.dev/runtime: 4h", false) +
				rankJob("eval-a", 2, "research", "sim.lockstep.dev/arrival: 30m, sim.lockstep.dev/runtime: 30m, scheduling.lockstep.dev/max-runtime: 30m", false) +
				rankJob("eval-b", 2, "research", "sim.lockstep.dev/arrival: 31m, sim.lockstep.dev/runtime: 30m, scheduling.lockstep.dev/max-runtime: 30m", false) +
				rankJob("production", 4, "production", "sim.lockstep.dev/arrival: 58m, sim.lockstep.dev/runtime: 1h"+tc.prodTerms, false) +
				rankJob("late", 2, "research", "sim.lockstep.dev/arrival: 59m, sim.lockstep.dev/runtime: 30m", false)
			opts := tc.opts
			opts.Models = lockstep
			r := run(t, cl, w, opts)
			s := r.Schedulers[0]
			got := want{Fates: fates(r)[Lockstep], LostHours: s.PreemptionDeviceHoursLost, ShortWaits: s.ShortWaits}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
