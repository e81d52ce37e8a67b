package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
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
	// RealNodes, when positive, runs that many real nodes in Lockstep's
	// cluster and, after its tables, gangs on them as real containers,
	// printing what each rank saw (devcluster.Options.RealNodes).
	RealNodes int
}

// Result is one column: the mode and, per scenario, its jobs once settled.
type Result struct {
	Mode      string
	Scenarios []ScenarioResult
}

// ScenarioResult is one scenario's jobs as one mode left them.
type ScenarioResult struct {
	Scenario string
	Jobs     []JobState
}

// Scenario returns the result of the named scenario.
func (r Result) Scenario(name string) ScenarioResult {
	for _, s := range r.Scenarios {
		if s.Scenario == name {
			return s
		}
	}
	return ScenarioResult{Scenario: name}
}

// Run runs every scenario under every mode, each mode on its own fresh
// local cluster, and prints one table per scenario.
func Run(ctx context.Context, o Options) ([]Result, error) {
	spec, err := clusterspec.Parse([]byte(clusterspec.PreemptionYAML))
	if err != nil {
		return nil, err
	}
	var results []Result
	for i, m := range modes {
		fmt.Fprintf(o.Out, "\n== (%c) %s ==\n", 'a'+i, m.name)
		r, err := runMode(ctx, o, m, spec, filepath.Join(o.StateDir, string(rune('a'+i))))
		if err != nil {
			return results, fmt.Errorf("%s: %w", m.name, err)
		}
		results = append(results, r)
	}
	for _, sc := range scenarios {
		printTable(o.Out, sc, results)
	}
	return results, nil
}

func runMode(ctx context.Context, o Options, m mode, spec *clusterspec.Cluster, dir string) (Result, error) {
	res := Result{Mode: m.name}
	real := 0
	if m.gang == lockstepJob {
		real = o.RealNodes
	}
	c, err := devcluster.Up(ctx, devcluster.Options{
		Dir: dir, BinDir: o.BinDir, Profile: m.profile, Spec: spec, BasePort: o.BasePort, Tied: true, Schedulers: m.schedulers,
		RealNodes: real,
	})
	if err != nil {
		return res, err
	}
	defer func() { _ = c.Down() }()
	cfg, err := c.RESTConfig()
	if err != nil {
		return res, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	// The JobSet scenario runs the real JobSet controller in every column.
	stop, err := c.StartController(ctx, devcluster.JobSetController, filepath.Dir(o.BinDir))
	if err != nil {
		return res, err
	}
	defer stop()
	if err := createPriorityClasses(ctx, client); err != nil {
		return res, err
	}
	for _, sc := range scenarios {
		fmt.Fprintf(o.Out, "   %s\n", sc.title)
		jobs, err := sc.run(ctx, env{client: client, dynamic: dyn}, m, sc, o.Quiet)
		if err != nil {
			return res, fmt.Errorf("%s: %w", sc.name, err)
		}
		for _, j := range jobs {
			fmt.Fprintf(o.Out, "     %s: %d Running, %d Pending, %d %s held\n", j.Job, j.Running, j.Pending, j.Held, sc.acc.unit())
		}
		res.Scenarios = append(res.Scenarios, ScenarioResult{Scenario: sc.name, Jobs: jobs})
		if err := cleanUp(ctx, client, sc.namespace); err != nil {
			return res, fmt.Errorf("%s: cleaning up: %w", sc.name, err)
		}
	}
	if real > 0 {
		if err := runOnRealNodes(ctx, client, o.Out); err != nil {
			return res, err
		}
	}
	return res, nil
}
