// Package controllerscmd implements `lockstep controllers`: the job
// integrations (Job, JobSet, …), the quota hint on gangs whose pods cannot
// be created, Kueue's pod groups and the gang integrity controller.
package controllerscmd

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kueuegroup"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Options are the flags of `lockstep controllers`.
type Options struct {
	Client         *clientopts.Options
	LeaderElect    bool
	LeaseNamespace string
	// NodeGrace is how long a member's node may be NotReady before its
	// gang restarts whole.
	NodeGrace               time.Duration
	MetricsAddr, HealthAddr string
	// HoldPodInformer is the fault-test hook of --test-hold-pod-informer.
	HoldPodInformer string
	// config is the controllers' client configuration (Complete).
	config *rest.Config
}

// NewOptions are the defaults the chart runs with.
func NewOptions() *Options {
	return &Options{Client: clientopts.ForComponent(), LeaderElect: true, LeaseNamespace: "lockstep-system",
		NodeGrace: 40 * time.Second, MetricsAddr: ":8081", HealthAddr: ":8084"}
}

// NewCommand returns `lockstep controllers`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "controllers",
		Short: "Run Lockstep's controllers: Jobs become gangs with no extra YAML; gangs that lose a member restart whole",
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
	f.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader; only the leader reconciles")
	f.StringVar(&o.LeaseNamespace, "leader-elect-namespace", o.LeaseNamespace, "namespace of the Lease")
	f.DurationVar(&o.NodeGrace, "node-not-ready-grace", o.NodeGrace, "how long a gang member's node may be NotReady before the gang restarts whole")
	f.StringVar(&o.HealthAddr, "health-probe-bind-address", o.HealthAddr, "host:port to serve /healthz and /readyz on; 0 disables it")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "host:port to serve Prometheus /metrics on (controller-runtime's reconcile metrics); 0 disables it")
	// A fault-test hook, hidden from --help.
	f.StringVar(&o.HoldPodInformer, "test-hold-pod-informer", "", "fault tests only: while this file exists, the pod informer does not retry a failed list or watch")
	_ = f.MarkHidden("test-hold-pod-informer")
	return cmd
}

// Complete loads the kubeconfig (or the in-cluster configuration).
func (o *Options) Complete() error {
	if err := o.Client.Complete(); err != nil {
		return err
	}
	o.config = rest.CopyConfig(o.Client.Config)
	o.config.UserAgent = "lockstep-controllers"
	o.config.QPS, o.config.Burst = 100, 200
	return nil
}

// Validate checks the flags.
func (o *Options) Validate() error {
	switch {
	case o.LeaderElect && o.LeaseNamespace == "":
		return fmt.Errorf("leader election needs --leader-elect-namespace, or --leader-elect=false")
	case o.NodeGrace < 0:
		return fmt.Errorf("--node-not-ready-grace %s: want a duration of 0 or more, e.g. 40s (0 restarts a gang as soon as a member's node is NotReady)", o.NodeGrace)
	}
	return nil
}

// Run reconciles until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	ctrl.SetLogger(klog.NewKlogr())
	mgr, err := ctrl.NewManager(o.config, ctrl.Options{
		Scheme:                  integrations.Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "lockstep-controllers",
		LeaderElectionNamespace: o.LeaseNamespace,
		HealthProbeBindAddress:  o.HealthAddr,
		Cache:                   cache.Options{DefaultTransform: cachetrim.Transform},
	})
	if err != nil {
		return err
	}
	if err := addHealthChecks(mgr); err != nil {
		return err
	}
	if err := o.setupControllers(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// addHealthChecks: alive while running; ready once the caches synced (a
// standby replica, waiting for the lease, is ready too).
func addHealthChecks(mgr manager.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	})
}

// setupControllers adds the integrity controller, Kueue's pod groups and
// the enabler that starts each job integration once its API is served.
func (o *Options) setupControllers(mgr manager.Manager) error {
	dc, err := discovery.NewDiscoveryClientForConfig(o.config)
	if err != nil {
		return err
	}
	taintRules, err := apidiscovery.Serves(dc, "resource.k8s.io/v1", "devicetaintrules")
	if err != nil {
		return err
	}
	composites, err := apidiscovery.Serves(dc, lockv1.GroupVersion.String(), podgroup.CompositeResource.Resource)
	if err != nil {
		return err
	}
	if !composites {
		klog.Background().Error(nil, "CompositePodGroups are not served: starting without them; jobs whose roles make a scheduling tree get no gang until the CRD is installed (apply the chart's crds/, which `helm upgrade` does not), when the controllers restart by themselves",
			"resource", podgroup.CompositeResource.String())
		if err := mgr.Add(apidiscovery.RestartWhenServed{Discovery: dc, GroupVersion: lockv1.GroupVersion.String(), Resource: podgroup.CompositeResource.Resource}); err != nil {
			return err
		}
	}
	kube, err := kubernetes.NewForConfig(o.config)
	if err != nil {
		return err
	}
	all := integrations.All()
	integrityCtl := &integrity.Reconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("lockstep-gang-integrity"), Kube: kube, //nolint:staticcheck // SA1019: core/v1 events, which the integrations' tests and users' kubectl describe read; moving to events/v1 is its own change
		NodeGrace: o.NodeGrace, TaintRules: taintRules, Integrations: all, HoldPodInformer: o.HoldPodInformer,
	}
	if err := integrityCtl.SetupWithManager(mgr); err != nil {
		return err
	}
	quotas := &jobintegration.QuotaReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("lockstep-gang-pod-quota"), Integrations: all} //nolint:staticcheck // SA1019: core/v1 events, which the integrations' tests and users' kubectl describe read; moving to events/v1 is its own change
	if err := quotas.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&job.Releaser{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	kueueGroups := &kueuegroup.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorderFor("lockstep-kueue-pod-groups")} //nolint:staticcheck // SA1019: core/v1 events, which the integrations' tests and users' kubectl describe read; moving to events/v1 is its own change
	if err := kueueGroups.SetupWithManager(mgr); err != nil {
		return err
	}
	enabler := &jobintegration.Enabler{Discovery: dc, Integrations: all, Interval: 30 * time.Second, Setup: func(integ jobintegration.Integration) error {
		r := &jobintegration.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("lockstep-" + integ.Name()), Integration: integ, Integrations: all, //nolint:staticcheck // SA1019: core/v1 events, which the integrations' tests and users' kubectl describe read; moving to events/v1 is its own change
			WithoutComposites: !composites}
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
		return integrityCtl.WatchOwners(integ)
	}}
	if err := enabler.Prepare(); err != nil {
		return err
	}
	return mgr.Add(enabler)
}
