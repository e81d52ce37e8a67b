// Package simulatecmd implements `lockstep simulate`: a workload replayed
// in virtual time on a cluster under several schedulers at once, with
// internal/simulate, printed as a table, JSON or YAML and, on request, an
// HTML report. It never writes to a cluster: --from-cluster only lists
// nodes, ResourceSlices and DeviceClasses.
package simulatecmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/simulate"
	simreport "github.com/lockstep-dev/lockstep/internal/simulate/report"
	simworkload "github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

// Options are the flags of `lockstep simulate`.
type Options struct {
	// ClusterFile is a cluster spec (docs/cluster-spec.md); FromCluster
	// reads the cluster of the kubeconfig instead (Client).
	ClusterFile string
	FromCluster bool
	Client      *clientopts.Options
	// Files are the workload's manifests ("-": standard input).
	Files          []string
	Schedulers     []string
	Horizon        time.Duration
	DefaultRuntime time.Duration
	DomainLabel    string
	// HTML, when set, is where the HTML report is written.
	HTML       string
	JobDetails bool
	Output     *output.Flag
	// PreemptionShortWait and PreemptionDelay are the scheduler's flags of
	// the same names, for the lockstep model.
	PreemptionShortWait time.Duration
	PreemptionDelay     string

	// Set by Complete and Validate.
	models   []simulate.Model
	delay    map[string]time.Duration
	sources  []simworkload.Source
	spec     *clusterspec.Cluster
	workload *simworkload.Workload
	clients  *clientopts.Clients
	stdin    io.Reader
}

// NewOptions are the defaults: every scheduler, a table.
func NewOptions() *Options {
	return &Options{
		Client:     clientopts.ForUser(clientopts.Cluster).WithoutClusterFlag(),
		Schedulers: simulate.ModelNames(),
		Output:     output.New("table", "", "table", "json", "yaml"),
		// The scheduler's default (lockstep scheduler --preemption-short-wait).
		PreemptionShortWait: 5 * time.Minute,
		stdin:               os.Stdin,
	}
}

// NewCommand returns `lockstep simulate`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "simulate (--cluster FILE | --from-cluster) -f WORKLOAD... [--schedulers ...] [--html FILE] [-o table|json|yaml]",
		Short: "Replay a workload in virtual time on a cluster under Lockstep, kube-scheduler pod by pod and the in-tree gang, with the scheduler's own decision core",
		Long: `Replay a workload — the Jobs, JobSets, PodGroups with their pods, PriorityClasses, DeviceClasses
and ResourceClaimTemplates you would apply, with the annotations sim.lockstep.dev/arrival and
sim.lockstep.dev/runtime (Go durations), failures (kind Failure) and generated mixes (kind Mix) —
on a cluster (a cluster spec file as for ` + "`dev up --cluster`" + `, or --from-cluster: the nodes,
ResourceSlices and DeviceClasses of the kubeconfig's cluster, read and never written), in
virtual time, under each scheduler: ` + strings.Join(simulate.ModelNames(), ", ") + `.

Every scheduler decides with Lockstep's own decision core (placement, DRA allocation,
preemption, the integrity controller's restarts). A workload or cluster that cannot be simulated
is refused before anything runs, naming the object and the field path. See docs/simulate.md.`,
		Example: `  lockstep simulate --cluster examples/clusters/default.yaml -f examples/simulate/seed004.yaml
  lockstep simulate --from-cluster --context prod -f last-month.yaml --html report.html
  lockstep simulate --cluster big.yaml -f mix.yaml --schedulers lockstep,pod-by-pod -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ClusterFile, "cluster", o.ClusterFile, "cluster spec file (docs/cluster-spec.md)")
	f.BoolVar(&o.FromCluster, "from-cluster", o.FromCluster, "read the nodes, ResourceSlices and DeviceClasses of the kubeconfig's cluster (read only; the simulation starts it empty)")
	f.StringArrayVarP(&o.Files, "filename", "f", o.Files, "workload manifests (repeatable; - for standard input)")
	f.StringSliceVar(&o.Schedulers, "schedulers", o.Schedulers, "schedulers to simulate: "+strings.Join(simulate.ModelNames(), ", "))
	f.DurationVar(&o.Horizon, "horizon", o.Horizon, "end the simulation at this virtual time (default: when nothing is left to happen)")
	f.DurationVar(&o.DefaultRuntime, "default-runtime", o.DefaultRuntime, "runtime of jobs without sim.lockstep.dev/runtime (default: the annotation is required)")
	f.StringVar(&o.DomainLabel, "domain-label", simulate.DefaultDomainLabel, "node label whose values are the domains fragmentation is reported for")
	f.StringVar(&o.HTML, "html", o.HTML, "also write the HTML report (self-contained, with plots) to this file")
	f.BoolVar(&o.JobDetails, "job-details", o.JobDetails, "also report every job's start, end and nodes under each scheduler")
	f.DurationVar(&o.PreemptionShortWait, "preemption-short-wait", o.PreemptionShortWait, "as the scheduler's flag, for the lockstep model: longest a preemptor waits for gangs that declared their end instead of evicting (0: never)")
	f.StringVar(&o.PreemptionDelay, "preemption-delay", o.PreemptionDelay, "as the scheduler's flag, for the lockstep model: preemption delay by PriorityClass, e.g. research=10m (a group's "+lockv1.PreemptionDelayAnnotation+" annotation wins)")
	o.Client.AddFlags(f)
	o.Output.AddFlag(f)
	return cmd
}

// Complete reads the workload files and the cluster spec file, and with
// --from-cluster the kubeconfig (the cluster itself is read by Run).
func (o *Options) Complete() error {
	sources, err := simworkload.ReadSources(o.Files, o.stdin)
	if err != nil {
		return fmt.Errorf("reading the workload: %w", err)
	}
	o.sources = sources
	if o.ClusterFile != "" {
		spec, err := clusterspec.Load(o.ClusterFile)
		if err != nil {
			return fmt.Errorf("%s: %w", o.ClusterFile, err)
		}
		o.spec = spec
	}
	if o.FromCluster {
		if err := o.Client.Complete(); err != nil {
			return err
		}
		c, err := clientopts.NewClients(o.Client.Config)
		if err != nil {
			return err
		}
		o.clients = c
	}
	return nil
}

// Validate refuses contradictory flags and a workload that cannot be
// simulated (Load), before anything runs.
func (o *Options) Validate() error {
	if err := o.Output.Validate(); err != nil {
		return err
	}
	switch {
	case o.ClusterFile == "" && !o.FromCluster:
		return errors.New("no cluster: pass --cluster FILE (a cluster spec, docs/cluster-spec.md) or --from-cluster")
	case o.ClusterFile != "" && o.FromCluster:
		return errors.New("--cluster and --from-cluster both given: pass one of them")
	case len(o.Files) == 0:
		return errors.New("no workload: pass -f FILE (manifests with sim.lockstep.dev/arrival and sim.lockstep.dev/runtime; docs/simulate.md)")
	case o.Horizon < 0:
		return fmt.Errorf("--horizon %s: must not be negative", o.Horizon)
	case o.PreemptionShortWait < 0:
		return fmt.Errorf("--preemption-short-wait %s: must not be negative", o.PreemptionShortWait)
	}
	if o.PreemptionDelay != "" {
		m, err := podgroup.ParseClassDurations("preemption-delay", o.PreemptionDelay)
		if err != nil {
			return fmt.Errorf("--preemption-delay: %w", err)
		}
		o.delay = m
	}
	models, err := simulate.ParseModels(o.Schedulers)
	if err != nil {
		return fmt.Errorf("--schedulers: %w", err)
	}
	o.models = models
	wl, err := simworkload.Load(o.sources, simworkload.LoadOptions{DefaultRuntime: o.DefaultRuntime})
	if err != nil {
		return err
	}
	o.workload = wl
	return nil
}

// Run reads the cluster, checks the workload against it, simulates and
// prints the report.
func (o *Options) Run(ctx context.Context, out io.Writer) error {
	cl, err := o.cluster(ctx)
	if err != nil {
		return err
	}
	if err := simulate.Check(ctx, cl, o.workload); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(simulate.GCPercent))
	}
	r, err := simulate.Run(ctx, cl, o.workload, simulate.Options{Models: o.models, Horizon: o.Horizon, DomainLabel: o.DomainLabel,
		PreemptionShortWait: o.PreemptionShortWait, PreemptionDelay: o.delay})
	if err != nil {
		return err
	}
	if o.HTML != "" {
		if err := writeHTML(o.HTML, r); err != nil {
			return err
		}
	}
	if !o.JobDetails {
		for i := range r.Schedulers {
			r.Schedulers[i].JobDetails = nil
		}
	}
	if o.Output.Structured() {
		return o.Output.Print(out, r)
	}
	return simreport.WriteTable(out, r, o.JobDetails)
}

func writeHTML(path string, r *simreport.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := simreport.WriteHTML(f, r); err != nil {
		_ = f.Close()
		return fmt.Errorf("--html: %w", err)
	}
	return f.Close()
}

// cluster is the cluster spec rendered, or the live cluster's nodes,
// slices and classes.
func (o *Options) cluster(ctx context.Context) (*simulate.Cluster, error) {
	if o.spec != nil {
		return simulate.ClusterFromSpec(o.spec)
	}
	cl, err := readCluster(ctx, o.clients.Kube)
	if err != nil {
		return nil, fmt.Errorf("--from-cluster: %w", err)
	}
	return cl, nil
}

// readCluster lists what a simulation runs on: nodes, ResourceSlices and
// DeviceClasses. It only reads.
func readCluster(ctx context.Context, kube kubernetes.Interface) (*simulate.Cluster, error) {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	slices, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	classes, err := kube.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing DeviceClasses: %w", err)
	}
	cl := &simulate.Cluster{Name: "from-cluster"}
	for i := range nodes.Items {
		cl.Nodes = append(cl.Nodes, live(&nodes.Items[i]))
	}
	for i := range slices.Items {
		cl.Slices = append(cl.Slices, &slices.Items[i])
	}
	for i := range classes.Items {
		cl.Classes = append(cl.Classes, &classes.Items[i])
	}
	if len(cl.Nodes) == 0 {
		return nil, errors.New("the cluster has no nodes")
	}
	return cl, nil
}

// live is a node as the simulation starts it: what it offers, without its
// current state (the simulation starts the cluster empty and healthy).
func live(n *corev1.Node) *corev1.Node {
	n = n.DeepCopy()
	kept := n.Spec.Taints[:0]
	for _, t := range n.Spec.Taints {
		// Taints the node controller sets for a node's state now.
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			continue
		}
		kept = append(kept, t)
	}
	n.Spec.Taints = kept
	return n
}
