package webhookcmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
)

// resolved is the client configuration and the options Complete and
// Validate make of a command line.
type resolved struct {
	Host, UserAgent     string
	Port                int
	URLHost, CertSource string
}

func TestCompleteValidate(t *testing.T) {
	a := clitest.Kubeconfig(t, "a", "", clitest.Context{Name: "a", Server: "https://a.example:6443"})
	b := clitest.Kubeconfig(t, "b", "b", clitest.Context{Name: "b", Server: "https://b.example:6443"})
	defaults := resolved{Host: "https://b.example:6443", UserAgent: "lockstep-webhook", Port: 9443, CertSource: "self"}
	for _, tc := range []struct {
		name       string
		argv       []string
		kubeconfig string // $KUBECONFIG; default: a and b as a list
		want       func(r *resolved)
		wantErr    []string
	}{
		{name: "the current context of the $KUBECONFIG list, the chart's defaults", want: func(*resolved) {}},
		{name: "out of cluster, as the local cluster runs it", argv: []string{"--kubeconfig", a, "--context", "a", "--port", "16449", "--url-host", "127.0.0.1:16449"},
			want: func(r *resolved) { r.Host, r.Port, r.URLHost = "https://a.example:6443", 16449, "127.0.0.1:16449" }},
		{name: "cert-manager's files", argv: []string{"--cert-source", "files", "--cert-dir", "/certs"},
			want: func(r *resolved) { r.CertSource = "files" }},
		{name: "an unknown certificate source", argv: []string{"--cert-source", "vault"},
			wantErr: []string{`--cert-source "vault": want self (the webhook keeps its certificate in a Secret) or files (serve what is in --cert-dir)`}},
		{name: "a port out of range", argv: []string{"--port", "0"},
			wantErr: []string{"--port 0: want 1-65535"}},
		{name: "no certificate directory", argv: []string{"--cert-dir", ""},
			wantErr: []string{"--cert-dir is empty"}},
		{name: "self without a Secret", argv: []string{"--secret-name", ""},
			wantErr: []string{"--cert-source self keeps the certificate in a Secret: give --secret-namespace and --secret-name"}},
		{name: "a URL host without a port", argv: []string{"--url-host", "127.0.0.1"},
			wantErr: []string{`--url-host "127.0.0.1": want host:port`}},
		{name: "no URL host and no Service", argv: []string{"--service-name", ""},
			wantErr: []string{"without --url-host the certificate names the Service: give --service-namespace and --service-name"}},
		{name: "no kubeconfig outside a pod", kubeconfig: clitest.Missing(t),
			wantErr: []string{"no cluster to talk to", "(in-cluster configuration", "pass --kubeconfig FILE or set $KUBECONFIG"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := clitest.List(a, b)
			if tc.kubeconfig != "" {
				env = tc.kubeconfig
			}
			clitest.Env(t, env)
			o := NewOptions()
			err := clitest.CompleteValidate(newCommand(o), tc.argv, func([]string) error { return o.Complete() }, o.Validate)
			if clitest.WantErr(t, err, tc.wantErr) {
				return
			}
			want := defaults
			tc.want(&want)
			got := resolved{Host: o.config.Host, UserAgent: o.config.UserAgent, Port: o.Webhook.Port, URLHost: o.Webhook.URLHost, CertSource: o.Webhook.CertSource}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
