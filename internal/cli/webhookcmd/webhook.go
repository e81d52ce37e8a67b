// Package webhookcmd implements `lockstep webhook`.
package webhookcmd

import (
	"context"
	"fmt"
	"net"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/webhook"
	webhookconfig "github.com/lockstep-dev/lockstep/internal/webhook/config"
)

// Options are the flags of `lockstep webhook`.
type Options struct {
	Client  *clientopts.Options
	Webhook webhook.Options
	// config is the webhook's client configuration (Complete).
	config *rest.Config
}

// NewOptions are the defaults the chart runs with.
func NewOptions() *Options {
	return &Options{Client: clientopts.ForComponent(), Webhook: webhook.Options{
		BindAddress: "0.0.0.0", Port: 9443, CertDir: "/tmp/lockstep-webhook-certs",
		ServiceNamespace: "lockstep-system", ServiceName: "lockstep-webhook",
		CertSource: webhook.CertSourceSelf, SecretNamespace: "lockstep-system", SecretName: "lockstep-webhook-tls",
		MutatingConfig: webhookconfig.MutatingConfigName, ValidatingConfig: webhookconfig.ValidatingConfigName,
		HealthAddr: ":8082", MetricsAddr: ":8085",
	}}
}

// NewCommand returns `lockstep webhook`.
func NewCommand() *cobra.Command { return newCommand(NewOptions()) }

func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve admission for PodGroups and for pods and Jobs that target Lockstep",
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
	w := &o.Webhook
	o.Client.AddFlags(f)
	f.StringVar(&w.BindAddress, "bind-address", w.BindAddress, "address to listen on")
	f.IntVar(&w.Port, "port", w.Port, "HTTPS port")
	f.StringVar(&w.URLHost, "url-host", w.URLHost, "host:port the API server calls the webhook at (out-of-cluster, e.g. the local control plane); empty uses the Service")
	f.StringVar(&w.ServiceNamespace, "service-namespace", w.ServiceNamespace, "namespace of the webhook Service")
	f.StringVar(&w.ServiceName, "service-name", w.ServiceName, "name of the webhook Service")
	f.StringVar(&w.CertDir, "cert-dir", w.CertDir, "directory the serving certificate is written to")
	f.Var(podgroup.DefaultCapacityTypesFlag{}, "default-capacity-types", podgroup.DefaultCapacityTypesUsage+" (for admission's warnings: give it the scheduler's value)")
	f.StringVar(&w.CertSource, "cert-source", w.CertSource, `"self": keep the serving certificate in the Secret, renew it while running and inject the CA into the webhook configurations; "files": serve what is in --cert-dir (cert-manager)`)
	f.StringVar(&w.SecretNamespace, "secret-namespace", w.SecretNamespace, "namespace of the Secret holding the serving certificate (--cert-source self)")
	f.StringVar(&w.SecretName, "secret-name", w.SecretName, "name of the Secret holding the serving certificate (--cert-source self)")
	f.StringVar(&w.MutatingConfig, "mutating-configuration", w.MutatingConfig, "MutatingWebhookConfiguration to inject the CA into (--cert-source self)")
	f.StringVar(&w.ValidatingConfig, "validating-configuration", w.ValidatingConfig, "ValidatingWebhookConfiguration to inject the CA into (--cert-source self)")
	f.StringVar(&w.HealthAddr, "health-probe-bind-address", w.HealthAddr, "host:port to serve /healthz and /readyz on; 0 disables it")
	f.StringVar(&w.MetricsAddr, "metrics-bind-address", w.MetricsAddr, "host:port to serve Prometheus /metrics on (controller-runtime's webhook metrics: requests by path and code, latency, in flight); 0 disables it")
	f.BoolVar(&w.Profiling, "profiling", w.Profiling, "also serve Go's pprof profiles under /debug/pprof/ on the metrics address (off: profiles show the process's internals to whoever reaches the port)")
	return cmd
}

// Complete loads the kubeconfig (or the in-cluster configuration).
func (o *Options) Complete() error {
	if err := o.Client.Complete(); err != nil {
		return err
	}
	o.config = rest.CopyConfig(o.Client.Config)
	o.config.UserAgent = "lockstep-webhook"
	// Informers only, plus a Job read when the cache lags: small.
	o.config.QPS, o.config.Burst = 50, 100
	return nil
}

// Validate checks the flags before anything is served.
func (o *Options) Validate() error {
	w := o.Webhook
	switch {
	case w.Port < 1 || w.Port > 65535:
		return fmt.Errorf("--port %d: want 1-65535", w.Port)
	case w.CertSource != webhook.CertSourceSelf && w.CertSource != webhook.CertSourceFiles:
		return fmt.Errorf("--cert-source %q: want %s (the webhook keeps its certificate in a Secret) or %s (serve what is in --cert-dir)", w.CertSource, webhook.CertSourceSelf, webhook.CertSourceFiles)
	case w.CertDir == "":
		return fmt.Errorf("--cert-dir is empty: name the directory the serving certificate is in")
	case w.CertSource == webhook.CertSourceSelf && (w.SecretNamespace == "" || w.SecretName == ""):
		return fmt.Errorf("--cert-source self keeps the certificate in a Secret: give --secret-namespace and --secret-name")
	case w.URLHost != "" && !hostPort(w.URLHost):
		return fmt.Errorf("--url-host %q: want host:port, e.g. 127.0.0.1:9443", w.URLHost)
	case w.URLHost == "" && (w.ServiceNamespace == "" || w.ServiceName == ""):
		return fmt.Errorf("without --url-host the certificate names the Service: give --service-namespace and --service-name")
	}
	return nil
}

func hostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	return err == nil && host != "" && port != ""
}

// Run serves admission until ctx ends.
func (o *Options) Run(ctx context.Context) error {
	ctrl.SetLogger(klog.NewKlogr())
	return webhook.Run(ctx, o.config, o.Webhook)
}
