package preflightcmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
)

func TestCompleteValidate(t *testing.T) {
	a := clitest.Kubeconfig(t, "a", "", clitest.Context{Name: "a", Server: "https://a.example:6443"})
	b := clitest.Kubeconfig(t, "b", "b", clitest.Context{Name: "b", Server: "https://b.example:6443"})
	for _, tc := range []struct {
		name       string
		argv       []string
		kubeconfig string // default: a and b, as a $KUBECONFIG list
		// wantHost and wantOutput are the cluster and -o resolved.
		wantHost, wantOutput string
		wantErr              []string
	}{
		{name: "tables by default, the current context of the $KUBECONFIG list", wantHost: "https://b.example:6443", wantOutput: "table"},
		{name: "--context picks another file's context", argv: []string{"--context", "a", "-o", "json"}, wantHost: "https://a.example:6443", wantOutput: "json"},
		{name: "--kubeconfig", argv: []string{"--kubeconfig", a, "--context", "a", "-o", "yaml"}, wantHost: "https://a.example:6443", wantOutput: "yaml"},
		{name: "--server overrides the cluster", argv: []string{"--server", "https://c.example:6443"}, wantHost: "https://c.example:6443", wantOutput: "table"},
		{name: "an output format preflight does not print", argv: []string{"-o", "wide"},
			wantErr: []string{`-o "wide": not an output format of this command: use one of table, json, yaml`}},
		{name: "-n: preflight reads the whole cluster", argv: []string{"-n", "ml"},
			wantErr: []string{"unknown shorthand flag: 'n'"}},
		{name: "an argument", argv: []string{"gpu"},
			wantErr: []string{`unknown command "gpu"`}},
		{name: "--kubeconfig naming no file", argv: []string{"--kubeconfig", "/nonexistent"},
			wantErr: []string{"--kubeconfig /nonexistent: no such file"}},
		{name: "no kubeconfig at all", kubeconfig: clitest.Missing(t),
			wantErr: []string{"no cluster to talk to", "pass --kubeconfig FILE or set $KUBECONFIG"}},
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
			if diff := cmp.Diff([]string{tc.wantHost, tc.wantOutput}, []string{o.Client.Config.Host, o.Output.Format}); diff != "" {
				t.Errorf("host, -o (-want,+got):\n%s", diff)
			}
		})
	}
}
