package simulate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Research (4 GPUs, 4h) is preempted by production (4 GPUs, 1h) at 1h30m.
// Without checkpoints it loses its 1h30m and runs all 4h again after production; saving
// every hour it loses the 30 minutes since and resumes from 1h; with 5
// minutes' notice and a 1-minute save it loses nothing, and production
// starts a minute later; with notice but no saves it runs out the notice
// and loses it all. (Lockstep alone: only it preempts DRA GPUs.)
func TestCheckpointsAndNotice(t *testing.T) {
	cl := cluster(t, gpus3x2)
	lockstep := lockstepOnly(t)
	type want struct {
		Fates     []string
		LostHours float64
	}
	for _, tc := range []struct {
		name, annotations string
		want              want
	}{
		{name: "no checkpoints", want: want{LostHours: 6, Fates: []string{
			"Job ml/research 0s→6h30m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h30m0s→2h30m0s worker-0 ×2, worker-1 ×2"}}},
		{name: "a checkpoint every hour", annotations: ", sim.lockstep.dev/checkpoint-interval: 1h", want: want{LostHours: 2, Fates: []string{
			"Job ml/research 0s→5h30m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h30m0s→2h30m0s worker-0 ×2, worker-1 ×2"}}},
		{name: "notice and a one-minute save", annotations: ", sim.lockstep.dev/checkpoint-interval: 1h, sim.lockstep.dev/checkpoint-duration: 1m, scheduling.lockstep.dev/preemption-notice: 5m", want: want{LostHours: 0, Fates: []string{
			"Job ml/research 0s→5h0m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h31m0s→2h31m0s worker-0 ×2, worker-1 ×2"}}},
		{name: "notice without saves", annotations: ", scheduling.lockstep.dev/preemption-notice: 5m", want: want{LostHours: 6.3333, Fates: []string{
			"Job ml/research 0s→6h35m0s worker-0 ×2, worker-1 ×2", "Job ml/production 1h35m0s→2h35m0s worker-0 ×2, worker-1 ×2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := priorities + oneGPU +
				rankJob("research", 4, "research", "sim.lockstep.dev/runtime: 4h"+tc.annotations, false) +
				rankJob("production", 4, "production", "sim.lockstep.dev/arrival: 1h30m, sim.lockstep.dev/runtime: 1h", false)
			r := run(t, cl, w, Options{Models: lockstep})
			s := r.Schedulers[0]
			got := want{Fates: fates(r)[Lockstep], LostHours: s.PreemptionDeviceHoursLost}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// lockstepOnly is the lockstep model alone (only it preempts DRA devices
// and has the scheduler's preemption terms).
func lockstepOnly(t *testing.T) []Model {
	t.Helper()
	m, err := ParseModels([]string{Lockstep})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
