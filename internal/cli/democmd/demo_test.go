package democmd

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
	"github.com/lockstep-dev/lockstep/internal/cli/dev"
)

func TestCompleteValidate(t *testing.T) {
	type resolved struct {
		StateDir, BinDir string
		BasePort         int
		Quiet            time.Duration
	}
	here, err := dev.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		argv    []string
		want    resolved
		wantErr []string
	}{
		{name: "make demo's defaults, binaries beside this one", want: resolved{StateDir: ".lockstep/demo", BinDir: here, BasePort: 16553, Quiet: 6 * time.Second}},
		{name: "every flag", argv: []string{"--state-dir", "/tmp/demo", "--bin-dir", "/opt/k8s", "--base-port", "21000", "--settle", "10s"},
			want: resolved{StateDir: "/tmp/demo", BinDir: "/opt/k8s", BasePort: 21000, Quiet: 10 * time.Second}},
		{name: "no settle time", argv: []string{"--settle", "0s"}, wantErr: []string{"--settle 0s: want a positive duration"}},
		{name: "a base port out of range", argv: []string{"--base-port", "65530"}, wantErr: []string{"--base-port 65530: want 1024-"}},
		{name: "no state directory", argv: []string{"--state-dir", ""}, wantErr: []string{"--state-dir is empty"}},
		{name: "--kubeconfig: the demo runs its own clusters", argv: []string{"--kubeconfig", "x"}, wantErr: []string{"unknown flag: --kubeconfig"}},
		{name: "an argument", argv: []string{"seed004"}, wantErr: []string{`unknown command "seed004"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			var out bytes.Buffer
			err := clitest.CompleteValidate(newCommand(o), tc.argv, func([]string) error { return o.Complete(&out) }, o.Validate)
			if clitest.WantErr(t, err, tc.wantErr) {
				return
			}
			d := o.Demo
			if diff := cmp.Diff(tc.want, resolved{StateDir: d.StateDir, BinDir: d.BinDir, BasePort: d.BasePort, Quiet: d.Quiet}); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			if d.Out != &out {
				t.Error("the comparison is not printed on the command's output")
			}
		})
	}
}
