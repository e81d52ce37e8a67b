package controllerscmd

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
)

// resolved is the client configuration and the options Complete and
// Validate make of a command line.
type resolved struct {
	Host, UserAgent string
	LeaderElect     bool
	LeaseNamespace  string
	NodeGrace       time.Duration
}

func TestCompleteValidate(t *testing.T) {
	a := clitest.Kubeconfig(t, "a", "", clitest.Context{Name: "a", Server: "https://a.example:6443"})
	b := clitest.Kubeconfig(t, "b", "b", clitest.Context{Name: "b", Server: "https://b.example:6443"})
	defaults := resolved{Host: "https://b.example:6443", UserAgent: "lockstep-controllers", LeaderElect: true, LeaseNamespace: "lockstep-system", NodeGrace: 40 * time.Second}
	for _, tc := range []struct {
		name       string
		argv       []string
		kubeconfig string // $KUBECONFIG; default: a and b as a list
		want       func(r *resolved)
		wantErr    []string
	}{
		{name: "the current context of the $KUBECONFIG list", want: func(*resolved) {}},
		{name: "--kubeconfig alone and the chart's flags", argv: []string{"--kubeconfig", a, "--context", "a", "--leader-elect-namespace", "gpu-sched", "--node-not-ready-grace", "2m"},
			want: func(r *resolved) {
				r.Host, r.LeaseNamespace, r.NodeGrace = "https://a.example:6443", "gpu-sched", 2*time.Minute
			}},
		{name: "a grace of 0 restarts at once", argv: []string{"--node-not-ready-grace", "0s"},
			want: func(r *resolved) { r.NodeGrace = 0 }},
		{name: "leader election off needs no Lease namespace", argv: []string{"--leader-elect=false", "--leader-elect-namespace", ""},
			want: func(r *resolved) { r.LeaderElect, r.LeaseNamespace = false, "" }},
		{name: "leader election without a Lease namespace", argv: []string{"--leader-elect-namespace", ""},
			wantErr: []string{"leader election needs --leader-elect-namespace, or --leader-elect=false"}},
		{name: "a negative grace", argv: []string{"--node-not-ready-grace", "-1s"},
			wantErr: []string{"--node-not-ready-grace -1s: want a duration of 0 or more"}},
		{name: "--server: a component takes --kubeconfig and --context only", argv: []string{"--server", "https://c.example:6443"},
			wantErr: []string{"unknown flag: --server"}},
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
			got := resolved{Host: o.config.Host, UserAgent: o.config.UserAgent, LeaderElect: o.LeaderElect, LeaseNamespace: o.LeaseNamespace, NodeGrace: o.NodeGrace}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
