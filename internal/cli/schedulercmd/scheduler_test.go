package schedulercmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
)

// resolved is the client configuration and the scheduler options Complete
// and Validate make of a command line.
type resolved struct {
	Host, UserAgent string
	QPS             float32
	Burst           int
	LeaderElect     bool
	Lease           string
}

func TestCompleteValidate(t *testing.T) {
	a := clitest.Kubeconfig(t, "a", "", clitest.Context{Name: "a", Server: "https://a.example:6443"})
	b := clitest.Kubeconfig(t, "b", "b", clitest.Context{Name: "b", Server: "https://b.example:6443"})
	defaults := resolved{Host: "https://b.example:6443", UserAgent: "lockstep-scheduler", QPS: -1, Burst: 400, LeaderElect: true, Lease: "lockstep-system/lockstep-scheduler"}
	for _, tc := range []struct {
		name       string
		argv       []string
		kubeconfig string // $KUBECONFIG; default: a and b as a list
		want       func(r *resolved)
		wantErr    []string
	}{
		{name: "the current context of the $KUBECONFIG list, no client-side rate limit", want: func(*resolved) {}},
		{name: "--kubeconfig alone, as the local cluster runs it", argv: []string{"--kubeconfig", a, "--context", "a", "--kube-api-qps", "500", "--kube-api-burst", "1000"},
			want: func(r *resolved) { r.Host, r.QPS, r.Burst = "https://a.example:6443", 500, 1000 }},
		{name: "--context of the list", argv: []string{"--context", "a", "--leader-elect-namespace", "gpu-sched"},
			want: func(r *resolved) { r.Host, r.Lease = "https://a.example:6443", "gpu-sched/lockstep-scheduler" }},
		{name: "leader election off: its timings are not checked", argv: []string{"--leader-elect=false", "--leader-elect-retry-period", "1m"},
			want: func(r *resolved) { r.LeaderElect = false }},
		{name: "leader election timings out of order", argv: []string{"--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "10s"},
			wantErr: []string{"leader election needs --leader-elect-lease-duration (10s) > --leader-elect-renew-deadline (10s) > --leader-elect-retry-period (2s)"}},
		{name: "leader election without a Lease name", argv: []string{"--leader-elect-name", ""},
			wantErr: []string{"leader election needs --leader-elect-namespace and --leader-elect-name, or --leader-elect=false"}},
		{name: "a QPS of 0, which client-go would turn into 5", argv: []string{"--kube-api-qps", "0"},
			wantErr: []string{"--kube-api-qps 0: give a positive rate, or a negative one for no client-side limit"}},
		{name: "a positive QPS without a burst", argv: []string{"--kube-api-qps", "50", "--kube-api-burst", "0"},
			wantErr: []string{"--kube-api-burst 0: a positive --kube-api-qps needs a burst of at least 1"}},
		{name: "--min-runtime that is not <class>=<duration>", argv: []string{"--min-runtime", "research=30m,batch"},
			wantErr: []string{"--min-runtime: min-runtime: Invalid value: \"batch\": want <PriorityClass>=<duration>, e.g. research=30m"}},
		{name: "--min-runtime of no positive duration", argv: []string{"--min-runtime", "research=-5m"},
			wantErr: []string{"--min-runtime: min-runtime[research]: Invalid value: \"-5m\": not a positive duration"}},
		{name: "--preemption-notice of no positive duration", argv: []string{"--preemption-notice", "research=10"},
			wantErr: []string{"--preemption-notice: preemption-notice[research]: Invalid value: \"10\": not a positive duration"}},
		{name: "-n: a component takes no namespace", argv: []string{"-n", "lockstep-system"},
			wantErr: []string{"unknown shorthand flag: 'n'"}},
		{name: "an argument", argv: []string{"now"},
			wantErr: []string{`unknown command "now"`}},
		{name: "--kubeconfig naming no file", argv: []string{"--kubeconfig", "/nonexistent"},
			wantErr: []string{"--kubeconfig /nonexistent: no such file"}},
		{name: "no kubeconfig outside a pod", kubeconfig: clitest.Missing(t),
			wantErr: []string{"no cluster to talk to", "not a pod with a service account (in-cluster configuration", "pass --kubeconfig FILE or set $KUBECONFIG"}},
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
			got := resolved{Host: o.config.Host, UserAgent: o.config.UserAgent, QPS: o.config.QPS, Burst: o.config.Burst,
				LeaderElect: o.Scheduler.LeaderElect, Lease: o.Scheduler.LeaseNamespace + "/" + o.Scheduler.LeaseName}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
