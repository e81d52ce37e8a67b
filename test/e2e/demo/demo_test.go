// Package demo runs `make demo`'s scenarios and checks the tables' story:
// pod by pod deadlocks (seed 004), Lockstep admits one job whole and the
// other holds nothing; under preemption (DRA and extended resource)
// Lockstep runs the urgent job and leaves the evicted one holding nothing;
// of two JobSets (the real JobSet controller), the second holds GPUs it
// cannot use pod by pod and nothing under Lockstep.
package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/internal/demo"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestDemoShowsDeadlockPreemptionAndLockstepFix(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".lockstep", "e2e", "demo-"+time.Now().Format("150405"))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var out bytes.Buffer
	results, err := demo.Run(ctx, demo.Options{
		BinDir: filepath.Join(root, "bin"), StateDir: dir, BasePort: harness.FreePorts(demo.PortCount), Out: &out, Quiet: 5 * time.Second,
	})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("want 3 columns, got %d", len(results))
	}
	type summary struct{ training, idle int }
	sum := func(r demo.ScenarioResult) summary {
		var s summary
		for _, j := range r.Jobs {
			if j.Running == 4 {
				s.training++
			} else {
				s.idle += j.Held
			}
		}
		return s
	}
	podByPod, lockstep := results[0], results[2]
	if got := sum(podByPod.Scenario("deadlock")); got != (summary{training: 0, idle: 6}) {
		t.Errorf("pod by pod: want the seed 004 deadlock (0 jobs training, 6 GPUs idle), got %+v", got)
	}
	if got := sum(lockstep.Scenario("deadlock")); got != (summary{training: 1, idle: 0}) {
		t.Errorf("Lockstep: want 1 job training and no GPU held by a job that cannot run, got %+v", got)
	}
	if got := sum(podByPod.Scenario("jobset")); got != (summary{training: 1, idle: 2}) {
		t.Errorf("pod by pod: want the second JobSet holding the 2 free GPUs while it cannot run, got %+v", got)
	}
	if got := sum(results[1].Scenario("jobset")); got != (summary{training: 1, idle: 2}) {
		t.Errorf("in-tree gang: want the same as pod by pod (a JobSet has no Workload), got %+v", got)
	}
	if got := sum(lockstep.Scenario("jobset")); got != (summary{training: 1, idle: 0}) {
		t.Errorf("Lockstep: want one JobSet training and the other holding nothing, got %+v", got)
	}
	for _, sc := range []string{"preempt-dra", "preempt-accel"} {
		jobs := lockstep.Scenario(sc).Jobs
		if len(jobs) != 2 {
			t.Fatalf("Lockstep %s: want 2 jobs, got %+v", sc, jobs)
		}
		research, production := jobs[0], jobs[1]
		if production.Running != 4 {
			t.Errorf("Lockstep %s: production (priority 10000) must run 4/4, got %+v", sc, production)
		}
		if research.Running != 0 || research.Held != 0 {
			t.Errorf("Lockstep %s: research must be evicted whole and hold nothing while it waits, got %+v", sc, research)
		}
	}
}
