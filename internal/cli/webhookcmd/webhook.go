// Package webhookcmd implements `lockstep webhook`.
package webhookcmd

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockstep-dev/lockstep/internal/webhook"
)

// NewCommand returns `lockstep webhook`.
func NewCommand() *cobra.Command {
	var kubeconfig string
	o := webhook.Options{
		BindAddress: "0.0.0.0", Port: 9443, CertDir: "/tmp/lockstep-webhook-certs",
		ServiceNamespace: "lockstep-system", ServiceName: "lockstep-webhook",
		CertSource: webhook.CertSourceSelf, SecretNamespace: "lockstep-system", SecretName: "lockstep-webhook-tls",
		MutatingConfig: webhook.MutatingConfigName, ValidatingConfig: webhook.ValidatingConfigName,
		HealthAddr: ":8082",
	}
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Serve admission for PodGroups and for pods and Jobs that target Lockstep",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(klog.NewKlogr())
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			cfg.UserAgent = "lockstep-webhook"
			// Informers only, plus a Job read when the cache lags: small.
			cfg.QPS, cfg.Burst = 50, 100
			return webhook.Run(cmd.Context(), cfg, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", kubeconfig, "kubeconfig file; empty means in-cluster configuration")
	f.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "address to listen on")
	f.IntVar(&o.Port, "port", o.Port, "HTTPS port")
	f.StringVar(&o.URLHost, "url-host", o.URLHost, "host:port the API server calls the webhook at (out-of-cluster, e.g. the local control plane); empty uses the Service")
	f.StringVar(&o.ServiceNamespace, "service-namespace", o.ServiceNamespace, "namespace of the webhook Service")
	f.StringVar(&o.ServiceName, "service-name", o.ServiceName, "name of the webhook Service")
	f.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory the serving certificate is written to")
	f.StringVar(&o.CertSource, "cert-source", o.CertSource, `"self": keep the serving certificate in the Secret, renew it while running and inject the CA into the webhook configurations; "files": serve what is in --cert-dir (cert-manager)`)
	f.StringVar(&o.SecretNamespace, "secret-namespace", o.SecretNamespace, "namespace of the Secret holding the serving certificate (--cert-source self)")
	f.StringVar(&o.SecretName, "secret-name", o.SecretName, "name of the Secret holding the serving certificate (--cert-source self)")
	f.StringVar(&o.MutatingConfig, "mutating-configuration", o.MutatingConfig, "MutatingWebhookConfiguration to inject the CA into (--cert-source self)")
	f.StringVar(&o.ValidatingConfig, "validating-configuration", o.ValidatingConfig, "ValidatingWebhookConfiguration to inject the CA into (--cert-source self)")
	f.StringVar(&o.HealthAddr, "health-probe-bind-address", o.HealthAddr, "host:port to serve /healthz and /readyz on; 0 disables it")
	return cmd
}
