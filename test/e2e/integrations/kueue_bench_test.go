package integrations

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// benchJob is one job of a replayed mix: created at At after the mix
// starts, Ranks one-GPU ranks, rack-bound or not.
type benchJob struct {
	Name     string
	At       time.Duration
	Ranks    int32
	RackOnly bool
}

// mixRun is what one run of a mix measured.
type mixRun struct {
	// heldGPUSeconds integrates, over the window, the GPUs of quota Kueue
	// holds for admitted workloads that are not yet running them (quota
	// reserved minus ranks bound).
	heldGPUSeconds float64
	// admitted and bound are, per job, how long after its creation Kueue
	// admitted it and all its ranks were bound (absent: not in the window).
	admitted, bound map[string]time.Duration
}

// runMix creates the mix's Jobs in LocalQueue team of ns at their times
// and samples, every interval until window ends, each Workload's reserved
// quota and bound ranks.
func runMix(b *testing.B, ctx context.Context, h *harness.Harness, ns string, mix []benchJob, window, interval time.Duration) mixRun {
	b.Helper()
	run := mixRun{admitted: map[string]time.Duration{}, bound: map[string]time.Duration{}}
	created := map[string]time.Time{}
	start := time.Now()
	last := start
	for now := start; now.Sub(start) < window; now = time.Now() {
		for _, j := range mix {
			if _, done := created[j.Name]; !done && now.Sub(start) >= j.At {
				var ann map[string]string
				if j.RackOnly {
					ann = map[string]string{lockv1.RequiredTopologyAnnotation: rackLabel}
				}
				createQueuedJob(b, ctx, h, ns, j.Name, j.Ranks, ann, nil)
				created[j.Name] = time.Now()
			}
		}
		held := 0
		for _, j := range mix {
			at, ok := created[j.Name]
			if !ok {
				continue
			}
			wl, err := workloadOf(ctx, h, ns, j.Name)
			if err != nil {
				b.Fatal(err)
			}
			_, nodes, err := jobPods(ctx, h, ns, j.Name)
			if err != nil {
				b.Fatal(err)
			}
			if wl != nil && conditionTrue(wl, "QuotaReserved") {
				held += int(j.Ranks) - len(nodes)
			}
			if _, seen := run.admitted[j.Name]; !seen && wl != nil && conditionTrue(wl, "Admitted") {
				run.admitted[j.Name] = time.Since(at)
			}
			if _, seen := run.bound[j.Name]; !seen && len(nodes) == int(j.Ranks) {
				run.bound[j.Name] = time.Since(at)
			}
		}
		t := time.Now()
		run.heldGPUSeconds += float64(held) * t.Sub(last).Seconds()
		last = t
		time.Sleep(interval)
	}
	return run
}

// BenchmarkKueuePlacementCheck measures, with Kueue v0.17.0's controller
// and the same replayed mix with and without Lockstep's placement check
// in one run, the GPU-seconds of quota held by admitted workloads that
// bind nothing, and how long each Job waits for admission and for its
// ranks to be bound; then, with nothing in the way, the admission and
// binding latency of a Job that fits, with and without the check,
// interleaved. It prints the figures (b.Log, b.ReportMetric) and never
// fails on time:
//
//	go test -run '^$' -bench BenchmarkKueuePlacementCheck -benchtime 1x -timeout 30m ./test/e2e/integrations/
func BenchmarkKueuePlacementCheck(b *testing.B) {
	h := harness.Get(b)
	ctx := harness.Context(b, 25*time.Minute)
	// Free GPUs fragmented, as in the story of docs/integrations.md: 3 in
	// each rack of 4.
	holders := h.Namespace(b)
	h.CreateDeviceClass(ctx, b, builders.ExtendedResourceClass("gpu-extended-"+holders, "gpu.example.com", string(extendedGPU)))
	gpuBlocker(b, ctx, h, holders, "hold-0", "worker-0")
	gpuBlocker(b, ctx, h, holders, "hold-2", "worker-2")
	// A rack-bound 4-rank Job that can never be placed here, then two
	// 2-rank Jobs that fit, in a ClusterQueue with quota for 4 GPUs.
	mix := []benchJob{{Name: "rack-bound", Ranks: 4, RackOnly: true}, {Name: "small-a", At: 5 * time.Second, Ranks: 2}, {Name: "small-b", At: 10 * time.Second, Ranks: 2}}
	const window = 60 * time.Second
	b.Run("mix", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runs := map[string]mixRun{}
			for _, mode := range []string{"without", "with"} {
				ns := benchQueue(b, ctx, h, mode)
				runs[mode] = runMix(b, ctx, h, ns, mix, window, 250*time.Millisecond)
				deleteJobs(b, ctx, h, ns)
			}
			b.Logf("replayed mix over %s (rack-bound 4-rank Job at 0 s that cannot be placed, 2-rank Jobs at 5 s and 10 s; quota 4 GPUs):", window)
			b.Logf("%-8s %-22s %-28s %-28s", "check", "quota held, nothing bound", "small-a admitted / bound", "small-b admitted / bound")
			for _, mode := range []string{"without", "with"} {
				r := runs[mode]
				b.Logf("%-8s %-22s %-28s %-28s", mode, fmt.Sprintf("%.0f GPU·s", r.heldGPUSeconds),
					latency(r, "small-a"), latency(r, "small-b"))
			}
			b.ReportMetric(runs["without"].heldGPUSeconds, "held-GPU-s-without")
			b.ReportMetric(runs["with"].heldGPUSeconds, "held-GPU-s-with")
		}
	})
	// A Job that fits, alone: admission and binding with and without the
	// check, interleaved.
	b.Run("fits-alone", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var with, without [][2]time.Duration
			for round := range 5 {
				for _, mode := range []string{"without", "with"} {
					ns := benchQueue(b, ctx, h, mode)
					r := runMix(b, ctx, h, ns, []benchJob{{Name: "fits", Ranks: 3}}, 10*time.Second, 20*time.Millisecond)
					a, okA := r.admitted["fits"]
					bd, okB := r.bound["fits"]
					if !okA || !okB {
						b.Fatalf("round %d %s the check: a Job that fits was not admitted and bound within 10 s (admitted %v, bound %v)", round, mode, a, bd)
					}
					if mode == "with" {
						with = append(with, [2]time.Duration{a, bd})
					} else {
						without = append(without, [2]time.Duration{a, bd})
					}
					deleteJobs(b, ctx, h, ns)
				}
			}
			b.Logf("a 3-rank Job that fits, alone (5 interleaved rounds): admitted / bound after creation, median (samples)")
			b.Logf("  without the check: %s / %s (%v)", median(without, 0), median(without, 1), without)
			b.Logf("  with the check:    %s / %s (%v)", median(with, 0), median(with, 1), with)
			b.ReportMetric(median(without, 1).Seconds(), "fit-bound-s-without")
			b.ReportMetric(median(with, 1).Seconds(), "fit-bound-s-with")
		}
	})
}

// benchQueue is a namespace with LocalQueue team in a ClusterQueue of 4
// GPUs, naming Lockstep's placement check when mode is "with".
func benchQueue(b *testing.B, ctx context.Context, h *harness.Harness, mode string) string {
	ns := h.Namespace(b)
	if mode == "with" {
		checkedQueue(b, ctx, h, ns, 4)
	} else {
		kueueQueue(b, ctx, h, ns, 4)
	}
	return ns
}

func latency(r mixRun, job string) string {
	a, okA := r.admitted[job]
	bd, okB := r.bound[job]
	switch {
	case !okA:
		return "not admitted"
	case !okB:
		return fmt.Sprintf("%s / not bound", a.Round(10*time.Millisecond))
	}
	return fmt.Sprintf("%s / %s", a.Round(10*time.Millisecond), bd.Round(10*time.Millisecond))
}

func median(samples [][2]time.Duration, i int) time.Duration {
	var vs []time.Duration
	for _, s := range samples {
		vs = append(vs, s[i])
	}
	slices.Sort(vs)
	return vs[len(vs)/2].Round(10 * time.Millisecond)
}

// deleteJobs deletes ns's Jobs and waits until none of their pods is left
// holding a device.
func deleteJobs(b *testing.B, ctx context.Context, h *harness.Harness, ns string) {
	b.Helper()
	bg := metav1.DeletePropagationBackground
	if err := h.Client.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	harness.Eventually(b, ctx, "the mix's pods gone", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods left", len(pods.Items)), nil
	})
}
