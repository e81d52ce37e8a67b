package explaincmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
)

// parsed is what Complete and Validate make of a command line.
type parsed struct {
	Kind, Name, Namespace, Output string
	Sources                       []string
}

func TestCompleteValidate(t *testing.T) {
	kubeconfig := clitest.Kubeconfig(t, "config", "dev", clitest.Context{Name: "dev", Server: "https://dev.example:6443", Namespace: "ml-team"},
		clitest.Context{Name: "prod", Server: "https://prod.example:6443"})
	manifest := filepath.Join(t.TempDir(), "train.yaml")
	if err := os.WriteFile(manifest, []byte("kind: Job"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		argv       []string
		kubeconfig string // default: kubeconfig
		want       parsed
		wantErr    []string
	}{
		{name: "TYPE NAME in the context's namespace", argv: []string{"podgroup", "train-b"},
			want: parsed{Kind: "podgroup", Name: "train-b", Namespace: "ml-team"}},
		{name: "TYPE/NAME, type lowercased, -n and -o yaml", argv: []string{"Job/train", "-n", "research", "-o", "yaml"},
			want: parsed{Kind: "job", Name: "train", Namespace: "research", Output: "yaml"}},
		{name: "--context of $KUBECONFIG, its namespace default", argv: []string{"jobset", "llama", "--context", "prod", "-o", "wide"},
			want: parsed{Kind: "jobset", Name: "llama", Namespace: "default", Output: "wide"}},
		{name: "-o name", argv: []string{"pod/train-0", "-o", "name"},
			want: parsed{Kind: "pod", Name: "train-0", Namespace: "ml-team", Output: "name"}},
		{name: "-o json", argv: []string{"pg", "train", "--output", "json"},
			want: parsed{Kind: "pg", Name: "train", Namespace: "ml-team", Output: "json"}},
		{name: "TYPE without a name", argv: []string{"podgroup"},
			wantErr: []string{`explain takes one TYPE NAME or TYPE/NAME, e.g. ` + "`explain podgroup train`" + ` or ` + "`explain job/train`" + `; got "podgroup"`}},
		{name: "two TYPE/NAMEs", argv: []string{"job/a", "job/b"},
			wantErr: []string{`explain takes one TYPE NAME or TYPE/NAME`}},
		{name: "three arguments", argv: []string{"job", "a", "b"},
			wantErr: []string{"accepts at most 2 arg(s), received 3"}},
		{name: "-f: a manifest not yet created, in -n's namespace", argv: []string{"-f", manifest, "-n", "research"},
			want: parsed{Namespace: "research", Sources: []string{manifest}}},
		{name: "-f with TYPE NAME", argv: []string{"job", "a", "-f", manifest},
			wantErr: []string{`explain takes TYPE NAME or -f FILE, not both; got "job a" and -f ` + manifest}},
		{name: "-f of a file that does not exist", argv: []string{"-f", manifest + ".missing"},
			wantErr: []string{"reading -f: open " + manifest + ".missing: no such file or directory"}},
		{name: "TYPE/ without a name", argv: []string{"job/"},
			wantErr: []string{`"job/": want TYPE/NAME`}},
		{name: "no argument", argv: nil,
			wantErr: []string{"explain takes one TYPE NAME or TYPE/NAME", "or -f FILE for something not yet created"}},
		{name: "-A: explain reads one namespace", argv: []string{"job", "a", "-A"},
			wantErr: []string{"unknown shorthand flag: 'A'"}},
		{name: "an output format explain does not print", argv: []string{"job", "a", "-o", "table"},
			wantErr: []string{`-o "table": not an output format of this command: use one of json, yaml, wide, name`}},
		{name: "--context naming no context", argv: []string{"job", "a", "--context", "staging"},
			wantErr: []string{"--context staging: no such context", "pass one of dev, prod"}},
		{name: "no kubeconfig at all", argv: []string{"job", "a"}, kubeconfig: clitest.Missing(t),
			wantErr: []string{"no cluster to talk to", "names no existing file", "pass --kubeconfig FILE or set $KUBECONFIG"}},
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
			got := parsed{Kind: o.Kind, Name: o.Name, Namespace: o.Client.Namespace, Output: o.Output.Format}
			for _, src := range o.sources {
				got.Sources = append(got.Sources, src.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
