package dev

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

func TestUpCompleteValidate(t *testing.T) {
	type resolved struct {
		Profile    devcluster.Profile
		Schedulers []devcluster.Scheduler
		BasePort   int
		BinDir     string
		Spec       *clusterspec.Cluster
		Peers      []string
	}
	defaults := resolved{Profile: devcluster.ProfileEKS, Schedulers: []devcluster.Scheduler{devcluster.SchedulerLockstep}, BasePort: devcluster.DefaultBasePort, Spec: clusterspec.Default()}
	specFile := filepath.Join("..", "..", "..", "examples", "clusters", "eks-node-supply.yaml")
	eks, err := clusterspec.Load(specFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		argv    []string
		want    func(r *resolved)
		wantErr []string
	}{
		{name: "seed 004's cluster, EKS's gates, Lockstep", want: func(*resolved) {}},
		{name: "the upstream profile beside kube-scheduler", argv: []string{"--profile", "upstream", "--schedulers", "lockstep,kube-scheduler", "--base-port", "20000", "--bin-dir", "/opt/k8s"},
			want: func(r *resolved) {
				r.Profile, r.BasePort, r.BinDir = devcluster.ProfileUpstream, 20000, "/opt/k8s"
				r.Schedulers = []devcluster.Scheduler{devcluster.SchedulerLockstep, devcluster.SchedulerKube}
			}},
		{name: "no scheduler", argv: []string{"--schedulers", "none"},
			want: func(r *resolved) { r.Schedulers = []devcluster.Scheduler{} }},
		{name: "a cluster spec", argv: []string{"--cluster", specFile},
			want: func(r *resolved) { r.Spec = eks }},
		{name: "integrations, started in dependency order", argv: []string{"--integrations", "kueue,trainer,ray,jobset"},
			want: func(r *resolved) { r.Peers = []string{"jobset", "trainer", "ray", "kueue"} }},
		{name: "every integration", argv: []string{"--integrations", "jobset,kueue,lws,trainer,training,mpi,ray"},
			want: func(r *resolved) { r.Peers = []string{"jobset", "trainer", "lws", "training", "mpi", "ray", "kueue"} }},
		{name: "an unknown integration", argv: []string{"--integrations", "volcano"},
			wantErr: []string{`--integrations: unknown integration "volcano": want any of jobset,trainer,lws,training,mpi,ray,karpenter,kueue`}},
		{name: "an integration twice", argv: []string{"--integrations", "lws,lws"},
			wantErr: []string{"--integrations: lws given twice"}},
		{name: "trainer without jobset", argv: []string{"--integrations", "trainer"},
			wantErr: []string{"--integrations: trainer needs jobset", "add jobset"}},
		{name: "an unknown profile", argv: []string{"--profile", "gke"},
			wantErr: []string{`unknown profile "gke": want one of [eks upstream]`}},
		{name: "an unknown scheduler", argv: []string{"--schedulers", "volcano"},
			wantErr: []string{`--schedulers: unknown scheduler "volcano": want lockstep, kube-scheduler or none`}},
		{name: "none beside a scheduler", argv: []string{"--schedulers", "none,lockstep"},
			wantErr: []string{"--schedulers none,lockstep: none runs no scheduler; pass it alone"}},
		{name: "a scheduler twice", argv: []string{"--schedulers", "lockstep,lockstep"},
			wantErr: []string{"--schedulers: lockstep given twice"}},
		{name: "a privileged base port", argv: []string{"--base-port", "443"},
			wantErr: []string{"--base-port 443: want 1024-"}},
		{name: "a cluster spec that does not exist", argv: []string{"--cluster", "/nonexistent.yaml"},
			wantErr: []string{"/nonexistent.yaml"}},
		{name: "an argument", argv: []string{"now"},
			wantErr: []string{`unknown command "now"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewUpOptions()
			err := clitest.CompleteValidate(newUpCommand(o), tc.argv, func([]string) error { return o.Complete() }, o.Validate)
			if clitest.WantErr(t, err, tc.wantErr) {
				return
			}
			want := defaults
			want.BinDir, _ = BinDir()
			tc.want(&want)
			got := resolved{Profile: o.profile, Schedulers: o.schedulers, BasePort: o.BasePort, BinDir: o.BinDir, Spec: o.spec}
			for _, p := range o.peers {
				got.Peers = append(got.Peers, p.Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDownCompleteValidate(t *testing.T) {
	abs, _ := filepath.Abs(DefaultStateDir)
	for _, tc := range []struct {
		name    string
		argv    []string
		want    string
		wantErr []string
	}{
		{name: "the default state directory, made absolute", want: abs},
		{name: "another state directory", argv: []string{"--state-dir", "/tmp/cluster-b"}, want: "/tmp/cluster-b"},
		{name: "an empty state directory", argv: []string{"--state-dir", ""}, wantErr: []string{"--state-dir is empty: name the state directory of the cluster to stop (default .lockstep/dev)"}},
		{name: "an argument", argv: []string{"all"}, wantErr: []string{`unknown command "all"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewDownOptions()
			err := clitest.CompleteValidate(newDownCommand(o), tc.argv, func([]string) error { return o.Complete() }, o.Validate)
			if clitest.WantErr(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, o.dir); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
