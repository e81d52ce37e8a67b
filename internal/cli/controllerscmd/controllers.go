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
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kueuegroup"
)

// NewCommand returns `lockstep controllers`.
func NewCommand() *cobra.Command {
	var kubeconfig, leaseNamespace, metricsAddr, healthAddr string
	nodeGrace := 40 * time.Second
	leaderElect := true
	cmd := &cobra.Command{
		Use:   "controllers",
		Short: "Run Lockstep's controllers: Jobs become gangs with no extra YAML; gangs that lose a member restart whole",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(klog.NewKlogr())
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			cfg.UserAgent = "lockstep-controllers"
			cfg.QPS, cfg.Burst = 100, 200
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                  integrations.Scheme(),
				Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
				LeaderElection:          leaderElect,
				LeaderElectionID:        "lockstep-controllers",
				LeaderElectionNamespace: leaseNamespace,
				HealthProbeBindAddress:  healthAddr,
				Cache:                   cache.Options{DefaultTransform: cachetrim.Transform},
			})
			if err != nil {
				return err
			}
			// Alive while running; ready once the caches synced (a standby
			// replica, waiting for the lease, is ready too).
			if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
				ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
				defer cancel()
				if !mgr.GetCache().WaitForCacheSync(ctx) {
					return fmt.Errorf("informer caches not synced")
				}
				return nil
			}); err != nil {
				return err
			}
			dc, err := discovery.NewDiscoveryClientForConfig(cfg)
			if err != nil {
				return err
			}
			taintRules, err := apidiscovery.Serves(dc, "resource.k8s.io/v1", "devicetaintrules")
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			all := integrations.All()
			integrityCtl := &integrity.Reconciler{
				Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("lockstep-gang-integrity"), Kube: kube,
				NodeGrace: nodeGrace, TaintRules: taintRules, Integrations: all,
			}
			if err := integrityCtl.SetupWithManager(mgr); err != nil {
				return err
			}
			quotas := &jobintegration.QuotaReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("lockstep-gang-pod-quota"), Integrations: all}
			if err := quotas.SetupWithManager(mgr); err != nil {
				return err
			}
			kueueGroups := &kueuegroup.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorderFor("lockstep-kueue-pod-groups")}
			if err := kueueGroups.SetupWithManager(mgr); err != nil {
				return err
			}
			enabler := &jobintegration.Enabler{Discovery: dc, Integrations: all, Interval: 30 * time.Second, Setup: func(integ jobintegration.Integration) error {
				r := &jobintegration.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("lockstep-" + integ.Name()), Integration: integ, Integrations: all}
				if err := r.SetupWithManager(mgr); err != nil {
					return err
				}
				return integrityCtl.WatchOwners(integ)
			}}
			if err := enabler.Prepare(); err != nil {
				return err
			}
			if err := mgr.Add(enabler); err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", kubeconfig, "kubeconfig file; empty means in-cluster configuration")
	f.BoolVar(&leaderElect, "leader-elect", leaderElect, "elect a leader; only the leader reconciles")
	f.StringVar(&leaseNamespace, "leader-elect-namespace", "lockstep-system", "namespace of the Lease")
	f.DurationVar(&nodeGrace, "node-not-ready-grace", nodeGrace, "how long a gang member's node may be NotReady before the gang restarts whole")
	f.StringVar(&healthAddr, "health-probe-bind-address", ":8084", "host:port to serve /healthz and /readyz on; 0 disables it")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8081", "host:port to serve Prometheus /metrics on (controller-runtime's reconcile metrics); 0 disables it")
	return cmd
}
