package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
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

// PortCount is how many ports from Options.BasePort the demo uses: one
// cluster's (devcluster.PortCount) per mode, side by side.
var PortCount = len(modes) * devcluster.PortCount

// step is what one mode did: a scenario's result, or an error.
type step struct {
	scenario ScenarioResult
	err      error
}

// Run runs every scenario under every mode, the modes side by side, each on
// its own fresh local cluster (the i-th mode's API server on BasePort +
// i×devcluster.PortCount), and prints one table per scenario as soon as
// every mode has run it: the first after one scenario, not after every mode
// has run them all one mode after another.
func Run(ctx context.Context, o Options) ([]Result, error) {
	spec, err := clusterspec.Parse([]byte(clusterspec.PreemptionYAML))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fmt.Fprintf(o.Out, "\nThree fresh local control planes, side by side; each table prints once all three have run its scenario:\n")
	steps := make([]chan step, len(modes))
	// tables closes once every table is printed: Lockstep's cluster then
	// runs its real nodes, printing as it goes.
	tables := make(chan struct{})
	var wg sync.WaitGroup
	for i, m := range modes {
		fmt.Fprintf(o.Out, "  (%c) %s\n", 'a'+i, m.name)
		steps[i] = make(chan step, len(scenarios)+1) // never blocks: a mode stops at its first error
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(steps[i])
			mo := o
			mo.BasePort = o.BasePort + i*devcluster.PortCount
			if err := runMode(ctx, mo, m, spec, filepath.Join(o.StateDir, string(rune('a'+i))), steps[i], tables); err != nil {
				steps[i] <- step{err: err}
			}
		}()
	}
	fail := func(err error) error {
		cancel()
		wg.Wait()
		return err
	}
	results, err := gather(o.Out, steps)
	if err != nil {
		return results, fail(err)
	}
	close(tables)
	for i := range modes {
		for st := range steps[i] {
			if st.err != nil {
				return results, fail(fmt.Errorf("%s: %w", modes[i].name, st.err))
			}
		}
	}
	wg.Wait()
	return results, nil
}

// gather receives the modes' steps scenario by scenario and prints each
// scenario's table once every mode has run it; it stops at the first mode
// that fails (or stops) and names it.
func gather(out io.Writer, steps []chan step) ([]Result, error) {
	results := make([]Result, len(modes))
	for i, m := range modes {
		results[i].Mode = m.name
	}
	for _, sc := range scenarios {
		for i, m := range modes {
			st, ok := <-steps[i]
			switch {
			case !ok:
				return results, fmt.Errorf("%s: stopped before %s", m.name, sc.name)
			case st.err != nil:
				return results, fmt.Errorf("%s: %w", m.name, st.err)
			}
			results[i].Scenarios = append(results[i].Scenarios, st.scenario)
		}
		printTable(out, sc, results)
	}
	return results, nil
}

// runMode runs the scenarios under m on a fresh cluster, sending each
// scenario's result on steps, and returns the error that stops it; with
// real nodes, once tables is closed it runs a gang on them, printing to
// o.Out.
func runMode(ctx context.Context, o Options, m mode, spec *clusterspec.Cluster, dir string, steps chan<- step, tables <-chan struct{}) error {
	real := 0
	if m.gang == lockstepJob {
		real = o.RealNodes
	}
	c, err := devcluster.Up(ctx, devcluster.Options{
		Dir: dir, BinDir: o.BinDir, Profile: m.profile, Spec: spec, BasePort: o.BasePort, Tied: true, Schedulers: m.schedulers,
		RealNodes: real,
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.Down() }()
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The JobSet scenario runs the real JobSet controller in every column.
	stop, err := c.StartController(ctx, devcluster.JobSetController, filepath.Dir(o.BinDir))
	if err != nil {
		return err
	}
	defer stop()
	if err := createPriorityClasses(ctx, client); err != nil {
		return err
	}
	for _, sc := range scenarios {
		jobs, err := sc.run(ctx, env{client: client, dynamic: dyn}, m, sc, o.Quiet)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		steps <- step{scenario: ScenarioResult{Scenario: sc.name, Jobs: jobs}}
		if err := cleanUp(ctx, client, sc.namespace); err != nil {
			return fmt.Errorf("%s: cleaning up: %w", sc.name, err)
		}
	}
	if real == 0 {
		return nil
	}
	select {
	case <-tables:
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintf(o.Out, "\n== %s ==\n", m.name)
	return runOnRealNodes(ctx, client, o.Out)
}
