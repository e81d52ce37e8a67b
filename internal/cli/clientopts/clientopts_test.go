package clientopts

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
)

// kubeconfigs are two files as a $KUBECONFIG list holds them: the first
// sets no current context, the second does.
type kubeconfigs struct{ a, b string }

func write(t *testing.T) kubeconfigs {
	return kubeconfigs{
		a: clitest.Kubeconfig(t, "a", "", clitest.Context{Name: "a", Server: "https://a.example:6443", Namespace: "team-a"},
			clitest.Context{Name: "plain", Server: "https://plain.example:6443"}),
		b: clitest.Kubeconfig(t, "b", "b", clitest.Context{Name: "b", Server: "https://b.example:6443", Namespace: "team-b"}),
	}
}

// resolved is what Complete resolves the flags to.
type resolved struct {
	Host, Namespace string
}

func complete(t *testing.T, o *Options, argv []string) (resolved, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "test", Args: cobra.ArbitraryArgs, Run: func(*cobra.Command, []string) {}}
	o.AddFlags(cmd.Flags())
	err := clitest.CompleteValidate(cmd, argv, func([]string) error { return o.Complete() }, func() error { return o.Validate(cmd.Flags().Args()) })
	if err != nil {
		return resolved{}, err
	}
	return resolved{Host: o.Config.Host, Namespace: o.Namespace}, nil
}

func TestComplete(t *testing.T) {
	k := write(t)
	for _, tc := range []struct {
		name       string
		options    func() *Options
		kubeconfig string // $KUBECONFIG; "" for none that exists
		argv       []string
		want       resolved
		// wantErr are parts of the error, the fix among them.
		wantErr []string
	}{
		{name: "a $KUBECONFIG list is merged: the current context of the file that sets it",
			options: func() *Options { return ForUser(Listing) }, kubeconfig: clitest.List(k.a, k.b),
			want: resolved{Host: "https://b.example:6443", Namespace: "team-b"}},
		{name: "--context picks a context of any file of the list, with its namespace",
			options: func() *Options { return ForUser(Namespaced) }, kubeconfig: clitest.List(k.a, k.b), argv: []string{"--context", "a"},
			want: resolved{Host: "https://a.example:6443", Namespace: "team-a"}},
		{name: "a context without a namespace addresses default",
			options: func() *Options { return ForUser(Namespaced) }, kubeconfig: clitest.List(k.a, k.b), argv: []string{"--context", "plain"},
			want: resolved{Host: "https://plain.example:6443", Namespace: "default"}},
		{name: "-n overrides the context's namespace",
			options: func() *Options { return ForUser(Listing) }, kubeconfig: clitest.List(k.a, k.b), argv: []string{"-n", "ml"},
			want: resolved{Host: "https://b.example:6443", Namespace: "ml"}},
		{name: "files of $KUBECONFIG that do not exist are skipped",
			options: func() *Options { return ForUser(Listing) }, kubeconfig: clitest.List(clitest.Missing(t), k.b),
			want: resolved{Host: "https://b.example:6443", Namespace: "team-b"}},
		{name: "--kubeconfig alone is read: $KUBECONFIG is not merged in",
			options: func() *Options { return ForUser(Namespaced) }, kubeconfig: k.b, argv: []string{"--kubeconfig", k.a, "--context", "a"},
			want: resolved{Host: "https://a.example:6443", Namespace: "team-a"}},
		{name: "-A addresses every namespace",
			options: func() *Options { return ForUser(Listing) }, kubeconfig: clitest.List(k.a, k.b), argv: []string{"-A"},
			want: resolved{Host: "https://b.example:6443"}},
		{name: "a cluster-wide command has no namespace",
			options: func() *Options { return ForUser(Cluster) }, kubeconfig: clitest.List(k.a, k.b),
			want: resolved{Host: "https://b.example:6443"}},
		{name: "a component reads $KUBECONFIG as the user commands do",
			options: ForComponent, kubeconfig: clitest.List(k.a, k.b),
			want: resolved{Host: "https://b.example:6443"}},
		{name: "a component's --context",
			options: ForComponent, kubeconfig: clitest.List(k.a, k.b), argv: []string{"--context", "a"},
			want: resolved{Host: "https://a.example:6443"}},
		{name: "--kubeconfig naming no file",
			options: func() *Options { return ForUser(Listing) }, kubeconfig: k.b, argv: []string{"--kubeconfig", "/nonexistent/kubeconfig"},
			wantErr: []string{"--kubeconfig /nonexistent/kubeconfig: no such file", "leave --kubeconfig out to use $KUBECONFIG or ~/.kube/config", ".lockstep/dev/kubeconfig"}},
		{name: "$KUBECONFIG naming no existing file, outside a pod",
			options: func() *Options { return ForUser(Namespaced) }, kubeconfig: clitest.Missing(t),
			wantErr: []string{"no cluster to talk to", "names no existing file", "not a pod with a service account", "pass --kubeconfig FILE or set $KUBECONFIG"}},
		{name: "a component with no kubeconfig outside a pod",
			options: ForComponent, kubeconfig: clitest.Missing(t),
			wantErr: []string{"no cluster to talk to", "not a pod with a service account (in-cluster configuration: ", "pass --kubeconfig FILE or set $KUBECONFIG"}},
		{name: "--context naming no context lists those there are",
			options: func() *Options { return ForUser(Namespaced) }, kubeconfig: clitest.List(k.a, k.b), argv: []string{"--context", "prod"},
			wantErr: []string{"--context prod: no such context", "pass one of a, b, plain", "kubectl config get-contexts"}},
		{name: "no current context and no --context",
			options: func() *Options { return ForUser(Namespaced) }, kubeconfig: k.a,
			wantErr: []string{"sets no current context", "pass --context (one of a, plain)", "kubectl config use-context NAME"}},
		{name: "-A with -n",
			options: func() *Options { return ForUser(Listing) }, kubeconfig: k.b, argv: []string{"-A", "-n", "ml"},
			wantErr: []string{"-A (all namespaces) and -n ml both given: pass one of them"}},
		{name: "-A with a name",
			options: func() *Options { return ForUser(Listing) }, kubeconfig: k.b, argv: []string{"-A", "train"},
			wantErr: []string{"-A (all namespaces) with a name (train)", "drop -A and pass -n NAMESPACE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clitest.Env(t, tc.kubeconfig)
			got, err := complete(t, tc.options(), tc.argv)
			if clitest.WantErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// The flags each kind of command takes: a user command takes kubectl's
// connection flags, -n unless it is cluster-wide and -A only if it lists;
// a component only --kubeconfig and --context.
func TestFlags(t *testing.T) {
	connection := []string{"as", "as-group", "as-uid", "as-user-extra", "certificate-authority", "client-certificate", "client-key",
		"cluster", "context", "disable-compression", "insecure-skip-tls-verify", "kubeconfig", "proxy-url", "request-timeout", "server", "tls-server-name", "token", "user"}
	for _, tc := range []struct {
		name    string
		options *Options
		want    []string
	}{
		{name: "cluster-wide", options: ForUser(Cluster), want: connection},
		{name: "namespaced", options: ForUser(Namespaced), want: append(slices.Clone(connection), "namespace")},
		{name: "listing", options: ForUser(Listing), want: append(slices.Clone(connection), "all-namespaces", "namespace")},
		{name: "component", options: ForComponent(), want: []string{"context", "kubeconfig"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			tc.options.AddFlags(fs)
			var got []string
			fs.VisitAll(func(f *pflag.Flag) { got = append(got, f.Name) })
			slices.Sort(got)
			slices.Sort(tc.want)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("flags (-want,+got):\n%s", diff)
			}
		})
	}
}
