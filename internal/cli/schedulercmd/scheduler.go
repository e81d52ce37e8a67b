// Package schedulercmd implements `lockstep scheduler`.
package schedulercmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/provision"
	"github.com/lockstep-dev/lockstep/internal/scheduler"
)

// Options are the flags of `lockstep scheduler`.
type Options struct {
	Client    *clientopts.Options
	QPS       float32
	Burst     int
	Scheduler scheduler.Options
	// crashAfterBinds is --test-crash-after-binds (negative: off).
	crashAfterBinds int64
	// instanceTypes is --karpenter-instance-types (read by Complete).
	instanceTypes string
	// minRuntime is --min-runtime (parsed by Complete).
	minRuntime string
	// preemptionNotice is --preemption-notice (parsed by Complete).
	preemptionNotice string
	// preemptionDelay is --preemption-delay (parsed by Complete).
	preemptionDelay string
	// config is the scheduler's client configuration (Complete).
	config *rest.Config
}

// NewOptions are the defaults the chart runs with.
func NewOptions() *Options {
	return &Options{Client: clientopts.ForComponent(), QPS: -1, Burst: 400, Scheduler: scheduler.Options{
		LeaderElect: true, LeaseNamespace: "lockstep-system", LeaseName: "lockstep-scheduler",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		MetricsAddr: ":8080", HealthAddr: ":8083", PreemptionShortWait: 5 * time.Minute,
	}, crashAfterBinds: -1}
}

// NewCommand returns `lockstep scheduler`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Schedule every pod whose schedulerName is lockstep: gangs all or nothing, DRA devices included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	o.Client.AddFlags(f)
	f.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "client QPS to the API server; negative: no client-side limit, the API server's API Priority and Fairness paces the writes (429 responses are retried)")
	f.IntVar(&o.Burst, "kube-api-burst", o.Burst, "client burst to the API server (with a positive --kube-api-qps)")
	f.BoolVar(&o.Scheduler.LeaderElect, "leader-elect", o.Scheduler.LeaderElect, "elect a leader through a coordination Lease; only the leader schedules")
	f.StringVar(&o.Scheduler.LeaseNamespace, "leader-elect-namespace", o.Scheduler.LeaseNamespace, "namespace of the Lease")
	f.StringVar(&o.Scheduler.LeaseName, "leader-elect-name", o.Scheduler.LeaseName, "name of the Lease")
	f.StringVar(&o.Scheduler.MetricsAddr, "metrics-bind-address", o.Scheduler.MetricsAddr, "host:port to serve Prometheus /metrics on; empty or 0 disables it")
	f.BoolVar(&o.Scheduler.Profiling, "profiling", o.Scheduler.Profiling, "also serve Go's pprof profiles under /debug/pprof/ on the metrics address (off: profiles show the process's internals to whoever reaches the port)")
	f.StringVar(&o.Scheduler.HealthAddr, "health-probe-bind-address", o.Scheduler.HealthAddr, "host:port to serve /healthz and /readyz on; empty or 0 disables it")
	f.StringVar(&o.Scheduler.Identity, "identity", o.Scheduler.Identity, "this replica's identity in the Lease (default hostname_pid)")
	f.DurationVar(&o.Scheduler.LeaseDuration, "leader-elect-lease-duration", o.Scheduler.LeaseDuration, "how long a non-leader waits before taking over an unrenewed Lease")
	f.DurationVar(&o.Scheduler.RenewDeadline, "leader-elect-renew-deadline", o.Scheduler.RenewDeadline, "how long the leader retries renewing before giving up")
	f.DurationVar(&o.Scheduler.RetryPeriod, "leader-elect-retry-period", o.Scheduler.RetryPeriod, "how often to try to acquire or renew")
	f.Var(podgroup.DefaultCapacityTypesFlag{}, "default-capacity-types", podgroup.DefaultCapacityTypesUsage)
	f.BoolVar(&o.Scheduler.KueuePlacementCheck, "kueue-placement-check", o.Scheduler.KueuePlacementCheck, "answer Kueue's AdmissionChecks of controllerName "+kueuecheck.ControllerName+": a Workload whose quota is reserved is admitted only if Lockstep can place it whole now (its pods pinned to the domain chosen), else retried holding no quota (needs Kueue's API served)")
	f.BoolVar(&o.Scheduler.Karpenter, "karpenter", o.Scheduler.Karpenter, "cooperate with Karpenter: bind every member of a gang disrupted whole with karpenter.sh/do-not-disrupt, so that consolidation and drift never drain one rank of a running gang (a member that names the annotation keeps its own value); with --karpenter-instance-types, also ask Karpenter for a gang's missing nodes as one set of NodeClaims, all or nothing")
	f.StringVar(&o.instanceTypes, "karpenter-instance-types", o.instanceTypes, "with --karpenter: a file listing the instance types Lockstep may ask Karpenter for (name, zones, capacityTypes, allocatable, labels, devices as the cluster spec writes them; docs/install.md, Autoscaling); empty: Lockstep asks for no nodes")
	f.DurationVar(&o.Scheduler.ProvisionTimeout, "karpenter-provision-timeout", scheduler.DefaultProvisionTimeout, "how long the nodes Lockstep asks Karpenter for have to become ready; then every node of the set is released and the next offering tried")
	f.StringVar(&o.minRuntime, "min-runtime", o.minRuntime, "minimum runtimes by PriorityClass, e.g. research=30m,batch=2h: a unit whose pods have that PriorityClass is no preemption victim before it has run that long since its newest member started (a group's "+lockv1.MinRuntimeAnnotation+" annotation wins)")
	f.StringVar(&o.preemptionNotice, "preemption-notice", o.preemptionNotice, "preemption notice by PriorityClass, e.g. research=10m: a unit whose pods have that PriorityClass, chosen as a victim, is marked PreemptionPending and evicted whole when it sets "+lockv1.CheckpointedAtAnnotation+" or the notice ends (a group's "+lockv1.PreemptionNoticeAnnotation+" annotation wins)")
	f.StringVar(&o.preemptionDelay, "preemption-delay", o.preemptionDelay, "preemption delay by PriorityClass, e.g. research=10m: a unit whose pods have that PriorityClass preempts nothing before it has waited that long since its newest pending member was created (a group's "+lockv1.PreemptionDelayAnnotation+" annotation wins)")
	f.DurationVar(&o.Scheduler.PreemptionShortWait, "preemption-short-wait", o.Scheduler.PreemptionShortWait, "longest a unit waits for running pods that declared their end ("+lockv1.MaxRuntimeAnnotation+", spec.activeDeadlineSeconds) instead of preempting, when waiting costs fewer device-hours than the victims would lose (0: never)")
	// A fault-test hook, hidden from --help: exit after the N-th binding.
	f.Int64Var(&o.crashAfterBinds, "test-crash-after-binds", o.crashAfterBinds, "fault tests only: exit right after the N-th successful binding (0: after the claim phase); negative: off")
	_ = f.MarkHidden("test-crash-after-binds")
	return cmd
}

// Complete loads the kubeconfig (or the in-cluster configuration) and
// applies the client rate flags to it.
func (o *Options) Complete() error {
	if err := o.Client.Complete(); err != nil {
		return err
	}
	o.config = rest.CopyConfig(o.Client.Config)
	o.config.QPS, o.config.Burst = o.QPS, o.Burst
	o.config.UserAgent = "lockstep-scheduler"
	if o.instanceTypes != "" {
		types, err := provision.LoadInstanceTypes(o.instanceTypes)
		if err != nil {
			return fmt.Errorf("--karpenter-instance-types: %w", err)
		}
		o.Scheduler.KarpenterInstanceTypes = types
	}
	if o.minRuntime != "" {
		m, err := podgroup.ParseMinRuntimes(o.minRuntime)
		if err != nil {
			return fmt.Errorf("--min-runtime: %w", err)
		}
		o.Scheduler.MinRuntime = m
	}
	if o.preemptionNotice != "" {
		m, err := podgroup.ParseClassDurations("preemption-notice", o.preemptionNotice)
		if err != nil {
			return fmt.Errorf("--preemption-notice: %w", err)
		}
		o.Scheduler.PreemptionNotice = m
	}
	if o.preemptionDelay != "" {
		m, err := podgroup.ParseClassDurations("preemption-delay", o.preemptionDelay)
		if err != nil {
			return fmt.Errorf("--preemption-delay: %w", err)
		}
		o.Scheduler.PreemptionDelay = m
	}
	if o.crashAfterBinds >= 0 {
		o.Scheduler.CrashAfterBinds = &o.crashAfterBinds
	}
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	s := o.Scheduler
	switch {
	case s.LeaderElect && !(s.LeaseDuration > s.RenewDeadline && s.RenewDeadline > s.RetryPeriod):
		return fmt.Errorf("leader election needs --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > --leader-elect-retry-period (%s)", s.LeaseDuration, s.RenewDeadline, s.RetryPeriod)
	case s.LeaderElect && (s.LeaseNamespace == "" || s.LeaseName == ""):
		return fmt.Errorf("leader election needs --leader-elect-namespace and --leader-elect-name, or --leader-elect=false")
	case o.instanceTypes != "" && !s.Karpenter:
		return fmt.Errorf("--karpenter-instance-types needs --karpenter")
	case s.ProvisionTimeout <= 0:
		return fmt.Errorf("--karpenter-provision-timeout %s: give a positive duration", s.ProvisionTimeout)
	case o.QPS == 0:
		// client-go would silently use its default of 5 per second.
		return fmt.Errorf("--kube-api-qps 0: give a positive rate, or a negative one for no client-side limit")
	case o.QPS > 0 && o.Burst < 1:
		return fmt.Errorf("--kube-api-burst %d: a positive --kube-api-qps needs a burst of at least 1", o.Burst)
	}
	return nil
}

// Run schedules until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(o.config)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(o.config)
	if err != nil {
		return err
	}
	// Leader election renews its Lease on a client of its own: scheduling
	// writes must never hold a renewal back behind the rate limiter.
	le := rest.CopyConfig(o.config)
	le.QPS, le.Burst = 5, 10
	le.UserAgent = "lockstep-scheduler-leader-election"
	if o.Scheduler.LeaderElectionClient, err = kubernetes.NewForConfig(le); err != nil {
		return err
	}
	s, err := scheduler.New(client, dyn, o.Scheduler)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
