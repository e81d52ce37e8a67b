package webhook

import (
	"context"
	"fmt"
	"net"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Options configure the webhook server.
type Options struct {
	// BindAddress and Port the HTTPS server listens on.
	BindAddress string
	Port        int
	// URLHost, when set (host:port), makes the API server call
	// https://URLHost/<path> — for the local control plane. Otherwise the
	// webhook is reached through Service ServiceNamespace/ServiceName:443.
	URLHost                       string
	ServiceNamespace, ServiceName string
	// CertDir receives tls.crt/tls.key; the pair lives in Secret
	// SecretNamespace/SecretName.
	CertDir                     string
	SecretNamespace, SecretName string
}

// Run serves admission until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ips, dns, cc, err := o.endpoint()
	if err != nil {
		return err
	}
	caPEM, certPEM, keyPEM, err := servingCert(ctx, client, o.SecretNamespace, o.SecretName, ips, dns)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	if err := writeCertDir(o.CertDir, certPEM, keyPEM); err != nil {
		return err
	}
	cc.caBundle = caPEM
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:         podgroup.Scheme(),
		Metrics:        metricsserver.Options{BindAddress: "0"},
		WebhookServer:  crwebhook.NewServer(crwebhook.Options{Host: o.BindAddress, Port: o.Port, CertDir: o.CertDir}),
		LeaderElection: false, // every replica serves
		Cache:          cacheOptions(),
	})
	if err != nil {
		return err
	}
	r, devices, err := setupCaches(ctx, mgr)
	if err != nil {
		return err
	}
	scheme := mgr.GetScheme()
	srv := mgr.GetWebhookServer()
	claims := &claimChecks{reads: r, Devices: devices}
	srv.Register(pathPodMutate, admission.WithDefaulter[*corev1.Pod](scheme, &PodDefaulter{reads: r}))
	srv.Register(pathPodValidate, admission.WithValidator[*corev1.Pod](scheme, &PodValidator{reads: r, Claims: claims}))
	srv.Register(pathPodGroup, admission.WithValidator[*lockv1.PodGroup](scheme, &PodGroupValidator{reads: r}))
	srv.Register(pathJob, admission.WithValidator[*batchv1.Job](scheme, &JobValidator{reads: r, Claims: claims}))
	srv.Register(pathJobMutate, admission.WithDefaulter[*batchv1.Job](scheme, JobDefaulter{}))
	if err := ensureConfigurations(ctx, client, cc, JobControllerUsers); err != nil {
		return fmt.Errorf("webhook configurations: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Serving admission", "port", o.Port, "url", o.URLHost, "service", o.ServiceName)
	return mgr.Start(ctx)
}

// endpoint derives the certificate's SANs and the configurations' client
// config from the options.
func (o Options) endpoint() ([]net.IP, []string, clientConfig, error) {
	if o.URLHost != "" {
		host, _, err := net.SplitHostPort(o.URLHost)
		if err != nil {
			return nil, nil, clientConfig{}, fmt.Errorf("--url-host %q: %w", o.URLHost, err)
		}
		cc := clientConfig{urlBase: "https://" + o.URLHost}
		if ip := net.ParseIP(host); ip != nil {
			return []net.IP{ip}, nil, cc, nil
		}
		return nil, []string{host}, cc, nil
	}
	svc := o.ServiceName + "." + o.ServiceNamespace + ".svc"
	return nil, []string{svc, svc + ".cluster.local"}, clientConfig{serviceNamespace: o.ServiceNamespace, svc: o.ServiceName, port: 443}, nil
}
