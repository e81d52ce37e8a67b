// Package demo runs `make demo`'s scenarios and checks the table's story:
// pod by pod deadlocks (seed 004), Lockstep admits one job whole and the
// other holds nothing.
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

func TestDemoShowsDeadlockAndLockstepFix(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".lockstep", "e2e", "demo-"+time.Now().Format("150405"))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	results, err := demo.Run(ctx, demo.Options{
		BinDir: filepath.Join(root, "bin"), StateDir: dir, BasePort: harness.FreeBasePort(), Out: &out, Quiet: 5 * time.Second,
	})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("want 3 columns, got %d", len(results))
	}
	type summary struct{ training, idleGPUs int }
	sum := func(r demo.Result) summary {
		var s summary
		for _, j := range r.Jobs {
			if j.Running == 4 {
				s.training++
			} else {
				s.idleGPUs += j.GPUs
			}
		}
		return s
	}
	if got := sum(results[0]); got != (summary{training: 0, idleGPUs: 6}) {
		t.Errorf("pod by pod: want the seed 004 deadlock (0 jobs training, 6 GPUs idle), got %+v", got)
	}
	if got := sum(results[2]); got != (summary{training: 1, idleGPUs: 0}) {
		t.Errorf("Lockstep: want 1 job training and no GPU held by a job that cannot run, got %+v", got)
	}
}
