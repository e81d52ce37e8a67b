package simulate

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The jobs whose roles make scheduling trees (testdata/trees: a Ray
// cluster, an elastic PyTorchJob, an MPIJob with a launcher) are
// simulated as Lockstep places them — one unit per job, all or nothing
// from its root: at every instant each tree job either meets every
// group's minimum (head and minReplicas workers; master and minReplicas
// workers; launcher and minAvailable) or holds nothing; the production Job
// preempts one tree whole. Under the in-tree model the same jobs are
// separate groups.
func TestTreesPlacedWhole(t *testing.T) {
	cl, wl := load(t, "trees")
	w := newWorld(context.Background(), models[0], cl, wl, Options{})
	trees := 0
	check := func(at string) {
		for _, j := range w.jobs {
			if j.tree == nil {
				continue
			}
			short, held := "", 0
			for _, g := range j.groups {
				bound := 0
				for _, pr := range g.pods {
					if pr.node != "" {
						bound++
					}
				}
				held += bound
				if gang := g.pg.Spec.SchedulingPolicy.Gang; gang != nil && bound < int(gang.MinCount) {
					short = fmt.Sprintf("%s has %d of minCount %d bound", g.pg.Name, bound, gang.MinCount)
				}
			}
			if short != "" && held > 0 {
				t.Errorf("at %s: tree %s is partly placed: %s, %d pods bound", at, j.spec.Ref(), short, held)
			}
		}
	}
	for _, j := range wl.Jobs {
		if j.Tree != nil {
			trees++
		}
	}
	if trees != 3 {
		t.Fatalf("%d jobs made trees, want 3 (ray, elastic, allreduce)", trees)
	}
	for w.events.Len() > 0 {
		at := w.events[0].at
		if err := w.run(max(at, time.Nanosecond)); err != nil { // 0 would run to the end
			t.Fatal(err)
		}
		check(at.String())
		if at == time.Hour {
			victims := 0
			for _, j := range w.jobs {
				victims += j.preempted
			}
			if victims != 1 {
				t.Errorf("at 1h the production Job preempted %d jobs, want one tree", victims)
			}
		}
	}
	for _, j := range w.jobs {
		if !j.done {
			t.Errorf("%s never completed", j.spec.Ref())
		}
	}

	inTree := newWorld(context.Background(), models[2], cl, wl, Options{})
	if err := inTree.run(0); err != nil {
		t.Fatal(err)
	}
	for _, j := range inTree.jobs {
		if j.tree != nil {
			t.Errorf("the in-tree model placed %s as a tree", j.spec.Ref())
		}
	}
}
