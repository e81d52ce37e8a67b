package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// Options configure the demo.
type Options struct {
	BinDir   string
	StateDir string
	BasePort int
	Out      io.Writer
	// Quiet is how long the state must hold still to count as settled.
	Quiet time.Duration
}

// Result is one column: the mode and its jobs once settled.
type Result struct {
	Mode string
	Jobs []JobState
}

// Run runs every mode on its own fresh local cluster and prints the table.
func Run(ctx context.Context, o Options) ([]Result, error) {
	var results []Result
	for i, m := range modes {
		fmt.Fprintf(o.Out, "\n== (%c) %s: seed 004, two 4-rank jobs, 1 GPU per rank, 6 GPUs ==\n", 'a'+i, m.name)
		jobs, err := runMode(ctx, o, m, filepath.Join(o.StateDir, string(rune('a'+i))))
		if err != nil {
			return results, fmt.Errorf("%s: %w", m.name, err)
		}
		for _, j := range jobs {
			fmt.Fprintf(o.Out, "   %s: %d Running, %d Pending, %d GPUs held\n", j.Job, j.Running, j.Pending, j.GPUs)
		}
		results = append(results, Result{Mode: m.name, Jobs: jobs})
	}
	PrintTable(o.Out, results)
	return results, nil
}

func runMode(ctx context.Context, o Options, m mode, dir string) ([]JobState, error) {
	c, err := devcluster.Up(ctx, devcluster.Options{
		Dir: dir, BinDir: o.BinDir, Profile: m.profile, BasePort: o.BasePort, Tied: true, Schedulers: m.schedulers,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Down() }()
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := createSeed004(ctx, client, m); err != nil {
		return nil, err
	}
	return settle(ctx, client, o.Quiet, 90*time.Second)
}

// PrintTable prints the comparison: per scheduler and job, pods Running and
// Pending, GPUs held by jobs that cannot run, and how many jobs can train.
func PrintTable(out io.Writer, results []Result) {
	fmt.Fprintln(out, "\nSeed 004 — two 4-rank jobs on 3 nodes × 2 GPUs:")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULER\tJOB\tRUNNING\tPENDING\tGPUS HELD\tGPUS HELD BY A JOB THAT CANNOT RUN\tJOBS TRAINING")
	for _, r := range results {
		training, idle := 0, 0
		for _, j := range r.Jobs {
			if j.trains() {
				training++
			} else {
				idle += j.GPUs
			}
		}
		for i, j := range r.Jobs {
			name, idleCol, trainCol := "", "", ""
			if i == 0 {
				name = r.Mode
				idleCol = fmt.Sprint(idle)
				trainCol = fmt.Sprintf("%d of %d", training, len(r.Jobs))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%d\t%s\t%s\n", name, j.Job, j.Running, ranks, j.Pending, j.GPUs, idleCol, trainCol)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(out, strings.TrimSpace(`
Read it: pod by pod, ranks of both jobs hold GPUs and no job can start (the deadlock).
A gang scheduler admits one job whole and leaves the other waiting with nothing held.`))
}
