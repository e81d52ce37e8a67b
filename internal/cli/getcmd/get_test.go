package getcmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
)

// parsed is what Complete and Validate make of a command line.
type parsed struct {
	Names         []string
	Namespace     string
	AllNamespaces bool
	Output        string
	Composites    bool
}

func TestCompleteValidate(t *testing.T) {
	kubeconfig := clitest.Kubeconfig(t, "config", "dev", clitest.Context{Name: "dev", Server: "https://dev.example:6443", Namespace: "ml-team"})
	for _, tc := range []struct {
		name       string
		argv       []string
		kubeconfig string // default: kubeconfig
		want       parsed
		wantErr    []string
	}{
		{name: "TYPE lists the context's namespace", argv: []string{"podgroups"},
			want: parsed{Namespace: "ml-team"}},
		{name: "TYPE NAME NAME with -n", argv: []string{"pg", "train", "eval", "-n", "research"},
			want: parsed{Names: []string{"train", "eval"}, Namespace: "research"}},
		{name: "TYPE/NAME TYPE/NAME, qualified type", argv: []string{"podgroup/train", "podgroups.scheduling.lockstep.dev/eval"},
			want: parsed{Names: []string{"train", "eval"}, Namespace: "ml-team"}},
		{name: "-A lists every namespace", argv: []string{"podgroups", "-A", "-o", "wide"},
			want: parsed{AllNamespaces: true, Output: "wide"}},
		{name: "--all-namespaces -o name", argv: []string{"PodGroups", "--all-namespaces", "-o", "name"},
			want: parsed{AllNamespaces: true, Output: "name"}},
		{name: "-o json", argv: []string{"pg", "-o", "json"}, want: parsed{Namespace: "ml-team", Output: "json"}},
		{name: "-o yaml", argv: []string{"pg", "train", "--output=yaml"}, want: parsed{Names: []string{"train"}, Namespace: "ml-team", Output: "yaml"}},
		{name: "no type", argv: []string{},
			wantErr: []string{"requires at least 1 arg"}},
		{name: "a type other than PodGroups", argv: []string{"pods"},
			wantErr: []string{`cannot get "pods": lockstep get lists PodGroups (podgroups, podgroup, pg) and CompositePodGroups (compositepodgroups, compositepodgroup, cpg) only; use kubectl get`}},
		{name: "cpg NAME", argv: []string{"cpg", "job"},
			want: parsed{Names: []string{"job"}, Namespace: "ml-team", Composites: true}},
		{name: "compositepodgroup/NAME, qualified type", argv: []string{"compositepodgroup/job", "compositepodgroups.scheduling.lockstep.dev/w0"},
			want: parsed{Names: []string{"job", "w0"}, Namespace: "ml-team", Composites: true}},
		{name: "a PodGroup among CompositePodGroups", argv: []string{"cpg/job", "pg/train"},
			wantErr: []string{`cannot get "pg" with CompositePodGroups: lockstep get lists one kind at a time`}},
		{name: "a CompositePodGroup among PodGroups", argv: []string{"pg/train", "cpg/job"},
			wantErr: []string{`cannot get "cpg": lockstep get lists PodGroups`}},
		{name: "a TYPE/NAME of another type among PodGroups", argv: []string{"pg/train", "job/train"},
			wantErr: []string{`cannot get "job"`}},
		{name: "TYPE/NAME then a bare NAME", argv: []string{"pg/train", "eval"},
			wantErr: []string{`"eval" after "pg/train": pass every resource as TYPE/NAME`}},
		{name: "-A with a name", argv: []string{"pg", "train", "-A"},
			wantErr: []string{"-A (all namespaces) with a name (train)", "drop -A and pass -n NAMESPACE"}},
		{name: "-A with TYPE/NAME", argv: []string{"pg/train", "-A"},
			wantErr: []string{"-A (all namespaces) with a name (train)"}},
		{name: "-A with -n", argv: []string{"pg", "-A", "-n", "ml-team"},
			wantErr: []string{"-A (all namespaces) and -n ml-team both given"}},
		{name: "an output format get does not print", argv: []string{"pg", "-o", "jsonpath={.items}"},
			wantErr: []string{`-o "jsonpath={.items}": not an output format of this command: use one of json, yaml, wide, name`}},
		{name: "an unknown flag", argv: []string{"pg", "--selector", "a=b"},
			wantErr: []string{"unknown flag: --selector"}},
		{name: "--kubeconfig naming no file", argv: []string{"pg", "--kubeconfig", "/nonexistent"},
			wantErr: []string{"--kubeconfig /nonexistent: no such file", "leave --kubeconfig out"}},
		{name: "no kubeconfig at all", argv: []string{"pg"}, kubeconfig: clitest.Missing(t),
			wantErr: []string{"no cluster to talk to", "pass --kubeconfig FILE or set $KUBECONFIG"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := kubeconfig
			if tc.kubeconfig != "" {
				env = tc.kubeconfig
			}
			clitest.Env(t, env)
			o := NewOptions()
			err := clitest.CompleteValidate(newCommand(o), tc.argv, o.Complete, o.Validate)
			if clitest.WantErr(t, err, tc.wantErr) {
				return
			}
			got := parsed{Names: o.Names, Namespace: o.Client.Namespace, AllNamespaces: o.Client.AllNamespaces, Output: o.Output.Format, Composites: o.Composites}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			if o.Clients == nil || o.Clients.Lockstep == nil || o.Clients.Kube == nil {
				t.Error("Complete built no clients")
			}
		})
	}
}
