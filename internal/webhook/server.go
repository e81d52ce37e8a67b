package webhook

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/webhook/config"
)

// Options configure the webhook server.
type Options struct {
	// BindAddress and Port the HTTPS server listens on.
	BindAddress string
	Port        int
	// URLHost, when set (host:port), is where the API server calls the
	// webhook (the local control plane runs it out of cluster); otherwise
	// through Service ServiceNamespace/ServiceName. Both only name the
	// serving certificate's hosts: the configurations are installed with the
	// chart (or by `lockstep dev up`).
	URLHost                       string
	ServiceNamespace, ServiceName string
	// CertDir holds tls.crt/tls.key.
	CertDir string
	// CertSource is "self": the webhook keeps its certificate in Secret
	// SecretNamespace/SecretName, renews it while it runs and injects its CA
	// into the configurations MutatingConfig and ValidatingConfig; or
	// "files": CertDir is kept current by someone else (cert-manager, a
	// mounted Secret) and the webhook only serves what it finds there.
	CertSource                       string
	SecretNamespace, SecretName      string
	MutatingConfig, ValidatingConfig string
	// HealthAddr serves /healthz and /readyz; "0" disables it.
	HealthAddr string
	// MetricsAddr serves Prometheus /metrics (controller-runtime's webhook
	// metrics: requests by path and code, latency, in flight); "" or "0"
	// disables it. Profiling also serves Go's pprof profiles there.
	MetricsAddr string
	Profiling   bool
}

// Cert sources.
const (
	CertSourceSelf  = "self"
	CertSourceFiles = "files"
)

// Run serves admission until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ips, dns, err := o.hosts()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 integrations.Scheme(),
		Metrics:                o.metricsOptions(),
		WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: o.BindAddress, Port: o.Port, CertDir: o.CertDir}),
		LeaderElection:         false, // every replica serves
		Cache:                  cacheOptions(),
		HealthProbeBindAddress: o.HealthAddr,
	})
	if err != nil {
		return err
	}
	composites, err := apidiscovery.Serves(client.Discovery(), lockv1.GroupVersion.String(), podgroup.CompositeResource.Resource)
	if err != nil {
		return err
	}
	if !composites {
		ctrl.LoggerFrom(ctx).Error(nil, "CompositePodGroups are not served: starting without them; a PodGroup naming a parent is refused until the CRD is installed (apply the chart's crds/, which `helm upgrade` does not), when the webhook restarts by itself",
			"resource", podgroup.CompositeResource.String())
		if err := mgr.Add(apidiscovery.RestartWhenServed{Discovery: client.Discovery(), GroupVersion: lockv1.GroupVersion.String(), Resource: podgroup.CompositeResource.Resource}); err != nil {
			return err
		}
	}
	r, devices, nodes, err := setupCaches(ctx, mgr, composites)
	if err != nil {
		return err
	}
	var rot *rotator
	switch o.CertSource {
	case CertSourceSelf:
		rot = &rotator{client: client, secret: types.NamespacedName{Namespace: o.SecretNamespace, Name: o.SecretName},
			ips: ips, dnsNames: dns, certDir: o.CertDir, mutating: o.MutatingConfig, validating: o.ValidatingConfig}
		// The server reads the pair at start: have one before it starts.
		if err := rot.sync(ctx); err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
		if err := mgr.Add(rot); err != nil {
			return err
		}
	case CertSourceFiles:
	default:
		return fmt.Errorf("--cert-source %q: want %s or %s", o.CertSource, CertSourceSelf, CertSourceFiles)
	}
	scheme := mgr.GetScheme()
	srv := mgr.GetWebhookServer()
	claims := &claimChecks{reads: r, Devices: devices}
	servesSchedulingGroup, err := apidiscovery.Serves(client.Discovery(), podgroup.UpstreamResource.GroupVersion().String(), podgroup.UpstreamResource.Resource)
	if err != nil {
		return err
	}
	podMutate := admission.WithDefaulter[*corev1.Pod](scheme, &PodDefaulter{reads: r})
	podMutate.Handler = podMutator{inner: podMutate.Handler, dropsSchedulingGroup: !servesSchedulingGroup}
	srv.Register(config.PathPodMutate, podMutate)
	srv.Register(config.PathPodValidate, admission.WithValidator[*corev1.Pod](scheme, &PodValidator{reads: r, Claims: claims}))
	srv.Register(config.PathPodGroup, admission.WithValidator[*lockv1.PodGroup](scheme, &PodGroupValidator{reads: r, topologyView: topologyView{Nodes: nodes, Devices: devices}}))
	srv.Register(config.PathComposite, admission.WithValidator[*lockv1.CompositePodGroup](scheme, &CompositePodGroupValidator{reads: r, topologyView: topologyView{Nodes: nodes, Devices: devices}}))
	for _, integ := range integrationSet {
		srv.Register(config.PathJobValidate(integ), admission.WithCustomValidator(scheme, integ.NewObject(), &JobValidator{reads: r, topologyView: topologyView{Nodes: nodes, Devices: devices}, Integration: integ, Claims: claims})) //nolint:staticcheck // SA1019: see JobValidator
		srv.Register(config.PathJobMutate(integ), admission.WithCustomDefaulter(scheme, integ.NewObject(), JobDefaulter{Integration: integ, DropsSchedulingGroup: !servesSchedulingGroup}))                                            //nolint:staticcheck // SA1019: see JobValidator
	}
	if err := addProbes(mgr, srv, rot); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Serving admission", "port", o.Port, "url", o.URLHost, "service", o.ServiceName, "certSource", o.CertSource)
	return mgr.Start(ctx)
}

// metricsOptions serve /metrics on MetricsAddr, and the profiles when
// asked for.
func (o Options) metricsOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.MetricsAddr}
	if opts.BindAddress == "" {
		opts.BindAddress = "0"
	}
	if o.Profiling && opts.BindAddress != "0" {
		opts.ExtraHandlers = metrics.ProfilingHandlers()
	}
	return opts
}

// addProbes: alive while the process runs; ready once the caches synced,
// the server listens and (self-managed) the CA is injected.
func addProbes(mgr ctrl.Manager, srv crwebhook.Server, rot *rotator) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("webhook-server", srv.StartedChecker()); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr)); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("certificate", func(*http.Request) error {
		if rot != nil && !rot.Ready() {
			return fmt.Errorf("serving certificate not in place yet")
		}
		return nil
	})
}

// cachesSynced is a readiness check that passes once the manager's
// informers have synced.
func cachesSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}
}

// hosts are the serving certificate's SANs.
func (o Options) hosts() ([]net.IP, []string, error) {
	if o.URLHost != "" {
		host, _, err := net.SplitHostPort(o.URLHost)
		if err != nil {
			return nil, nil, fmt.Errorf("--url-host %q: %w", o.URLHost, err)
		}
		if ip := net.ParseIP(host); ip != nil {
			return []net.IP{ip}, nil, nil
		}
		return nil, []string{host}, nil
	}
	svc := o.ServiceName + "." + o.ServiceNamespace + ".svc"
	return nil, []string{svc, svc + ".cluster.local"}, nil
}
