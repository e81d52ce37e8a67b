package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/simulate/report"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden reports in testdata/*/report.golden and report.json.golden")

// load reads testdata/<name>/cluster.yaml and workload.yaml, checked.
func load(t testing.TB, name string) (*Cluster, *workload.Workload) {
	t.Helper()
	spec, err := clusterspec.Load(filepath.Join("testdata", name, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ClusterFromSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", name, "workload.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wl, err := workload.Load([]workload.Source{{Name: "workload.yaml", Data: b}}, workload.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), cl, wl); err != nil {
		t.Fatal(err)
	}
	return cl, wl
}

// The report of each scenario — the table with every job's fate, and the
// JSON — against its golden files (go test ./internal/simulate -rewrite
// regenerates them).
func TestScenarios(t *testing.T) {
	for _, name := range []string{"seed004", "mixed", "trees"} {
		t.Run(name, func(t *testing.T) {
			cl, wl := load(t, name)
			r, err := Run(context.Background(), cl, wl, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var table bytes.Buffer
			if err := report.WriteTable(&table, r, true); err != nil {
				t.Fatal(err)
			}
			js, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name, "report.golden"), table.String())
			golden(t, filepath.Join("testdata", name, "report.json.golden"), string(js)+"\n")
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (run with -rewrite after checking it) (-want,+got):\n%s", path, diff)
	}
}

// Seed 004 as the demo shows it: pod by pod, ranks of both jobs hold the
// six GPUs and neither job ever runs; Lockstep runs one job whole, then
// the other, holding nothing idle.
func TestSeed004(t *testing.T) {
	cl, wl := load(t, "seed004")
	r, err := Run(context.Background(), cl, wl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Completed, NeverStarted int
		HeldAtEnd               int
		HeldIdle                bool
		Order                   []string
	}
	got := map[string]outcome{}
	for _, s := range r.Schedulers {
		o := outcome{Completed: s.JobsCompleted, NeverStarted: s.JobsNeverStarted, HeldIdle: s.DeviceHoursHeldIdle > 0}
		for _, j := range s.JobDetails {
			o.HeldAtEnd += j.DevicesHeld
			if j.StartOrder > 0 {
				o.Order = append(o.Order, j.Job)
			}
		}
		got[s.Name] = o
	}
	both := []string{"Job ml-team/train-a", "Job ml-team/train-b"}
	want := map[string]outcome{
		Lockstep:   {Completed: 2, Order: both},
		InTreeGang: {Completed: 2, Order: both},
		PodByPod:   {NeverStarted: 2, HeldAtEnd: 6, HeldIdle: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	// One after the other.
	ls := r.Schedulers[0]
	if a, b := ls.JobDetails[0], ls.JobDetails[1]; b.StartSeconds == nil || a.EndSeconds == nil || *b.StartSeconds < *a.EndSeconds {
		t.Errorf("lockstep: train-b started before train-a ended: %+v %+v", a, b)
	}
}

// The example of docs/simulate.md and the README, and the cluster it
// names, are seed 004's golden workload and cluster: the documented
// output is the golden one.
func TestExampleIsTheSeed004Golden(t *testing.T) {
	for example, golden := range map[string]string{
		"../../examples/simulate/seed004.yaml": "testdata/seed004/workload.yaml",
		"../../examples/clusters/default.yaml": "testdata/seed004/cluster.yaml",
	} {
		a, err := os.ReadFile(example)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(b), string(a)); diff != "" {
			t.Errorf("%s differs from %s (-golden,+example):\n%s", example, golden, diff)
		}
	}
}

// Each scheduler's figures per priority add up to its totals: every job in
// one priority, completions and device-hours lost to preemption split among
// them, and no priority finishing after the whole workload.
func TestPrioritiesAddUp(t *testing.T) {
	cl, wl := load(t, "mixed")
	r, err := Run(context.Background(), cl, wl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	preemptedSomewhere := false
	for _, s := range r.Schedulers {
		jobs, completed, completions, lost := 0, 0, 0, 0.0
		for _, p := range s.ByPriority {
			jobs += p.Jobs
			completed += p.JobsCompleted
			completions += p.CompletionSeconds.Count
			lost += p.PreemptionDeviceHoursLost
			if (p.MakespanSeconds != nil) != (p.JobsCompleted == p.Jobs) {
				t.Errorf("%s priority %d: makespan %v with %d of %d jobs completed; want one exactly when all completed", s.Name, p.Priority, p.MakespanSeconds, p.JobsCompleted, p.Jobs)
			}
			if p.MakespanSeconds != nil && s.MakespanSeconds != nil && *p.MakespanSeconds > *s.MakespanSeconds {
				t.Errorf("%s priority %d: makespan %v past the workload's %v", s.Name, p.Priority, *p.MakespanSeconds, *s.MakespanSeconds)
			}
		}
		if jobs != s.Jobs || completed != s.JobsCompleted || completions != s.CompletionSeconds.Count {
			t.Errorf("%s: priorities count %d jobs, %d completed, %d completion times; totals %d, %d, %d", s.Name, jobs, completed, completions, s.Jobs, s.JobsCompleted, s.CompletionSeconds.Count)
		}
		if math.Abs(lost-s.PreemptionDeviceHoursLost) > 1e-3 {
			t.Errorf("%s: priorities lost %.4f device-hours to preemption, total %.4f", s.Name, lost, s.PreemptionDeviceHoursLost)
		}
		preemptedSomewhere = preemptedSomewhere || s.PreemptionDeviceHoursLost > 0
	}
	if !preemptedSomewhere {
		t.Error("the mixed trace preempted no running gang under any scheduler: the split of what preemption cost is not exercised")
	}
}
