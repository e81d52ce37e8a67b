package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// UpOptions are the flags of `lockstep dev up`.
type UpOptions struct {
	ClusterFile string
	Profile     string
	Detach      bool
	StateDir    string
	BinDir      string
	BasePort    int
	Timeout     time.Duration
	Schedulers  []string
	// Integrations are the other projects' controllers to run beside the
	// cluster (devcluster.Peers by name).
	Integrations []string
	// RealNodes and RealNodeGPUs: nodes that run real containers, and the
	// simulated GPUs of each.
	RealNodes    int
	RealNodeGPUs int

	spec       *clusterspec.Cluster
	profile    devcluster.Profile
	schedulers []devcluster.Scheduler
	peers      []devcluster.Controller
}

// NewUpOptions are the defaults: seed 004's cluster, EKS's gates, Lockstep's scheduler.
func NewUpOptions() *UpOptions {
	return &UpOptions{StateDir: DefaultStateDir, Profile: string(devcluster.ProfileEKS), BasePort: devcluster.DefaultBasePort, Timeout: 3 * time.Minute, Schedulers: []string{string(devcluster.SchedulerLockstep)}, RealNodeGPUs: 2}
}

func newUpCommand(o *UpOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up [--cluster FILE] [--profile eks|upstream] [--integrations jobset,kueue,…] [--real-nodes N] [--detach]",
		Short: "Start the local control plane (foreground until Ctrl-C, or --detach)",
		Long: `Starts etcd, kube-apiserver, kube-controller-manager (v1.37, from bin/) and kwok
as the node simulator on loopback, then creates the Nodes, ResourceSlices and
DeviceClasses of the cluster spec (default: 3 nodes × 2 GPUs of gpu.example.com).
With --integrations it also runs other projects' controllers beside it, as the
e2e tests do (bin/<name>-controller, built by make build at the versions
hack/integrations pins, with their CRDs and webhooks): jobset, kueue, lws,
trainer (Kubeflow Trainer, needs jobset), training (Kubeflow training operator:
PyTorchJob), mpi (MPI operator), ray (KubeRay) and karpenter (Karpenter with
its kwok cloud provider: NodePool gpu launches gpu-4x and gpu-8x nodes in
zone-a and zone-b, and Lockstep's scheduler asks it for gangs' missing nodes). They are components like the
others: restarted if they exit, stopped by dev down. With kueue, Lockstep's
scheduler answers Kueue's placement check and the AdmissionCheck
lockstep-placement is created: name it in a ClusterQueue's admissionChecks.
With --real-nodes N it also runs N real nodes (real-0, real-1, …, labelled
dev.lockstep.dev/real-node=true) whose pods run as real containers: a kubelet
v1.37 and containerd each (bin/kubelet, bin/containerd; runc and the CNI
plugins from the host: apt-get install runc containernetworking-plugins), the
images lockstep.local/pause and lockstep.local/rank built locally, and the
simulated-GPU DRA driver as the kubelet plugin publishing --real-node-gpus
GPUs of gpu.example.com per node. It needs root. See docs/dev-cluster.md.
The admin kubeconfig is written to <state-dir>/kubeconfig.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ClusterFile, "cluster", o.ClusterFile, "cluster spec file (see docs/cluster-spec.md); default: 3 nodes × 2 GPUs")
	f.StringVar(&o.Profile, "profile", o.Profile, "feature-gate profile: eks (default-on gates only, like a managed control plane) or upstream (in-tree gang scheduling on)")
	f.BoolVar(&o.Detach, "detach", o.Detach, "return once the cluster is ready and leave it running (stop it with `lockstep dev down`)")
	f.StringVar(&o.StateDir, "state-dir", o.StateDir, "directory for kubeconfig, certificates, etcd data and logs")
	f.StringVar(&o.BinDir, "bin-dir", o.BinDir, "directory holding etcd, kube-apiserver, kube-controller-manager and kwok (default: beside this binary)")
	f.IntVar(&o.BasePort, "base-port", o.BasePort, "kube-apiserver port on 127.0.0.1; etcd, controller-manager, simulator, schedulers, webhook and metrics use the next 8 ports")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait for the cluster to be ready")
	f.StringSliceVar(&o.Schedulers, "schedulers", o.Schedulers, "schedulers to run: lockstep, kube-scheduler (v1.37, the reference), or none")
	f.IntVar(&o.RealNodes, "real-nodes", o.RealNodes, "nodes that run pods as real containers (kubelet, containerd, the simulated-GPU DRA driver) beside the simulated ones; needs root")
	f.IntVar(&o.RealNodeGPUs, "real-node-gpus", o.RealNodeGPUs, "simulated GPUs (gpu.example.com) each real node's DRA driver publishes")
	f.StringSliceVar(&o.Integrations, "integrations", o.Integrations, "other projects' controllers to run beside the cluster, any of: jobset,kueue,lws,trainer,training,mpi,ray,karpenter")
	return cmd
}

// Complete fills in defaults and loads the cluster spec.
func (o *UpOptions) Complete() error {
	if o.BinDir == "" {
		dir, err := BinDir()
		if err != nil {
			return err
		}
		o.BinDir = dir
	}
	if o.ClusterFile == "" {
		o.spec = clusterspec.Default()
		return nil
	}
	spec, err := clusterspec.Load(o.ClusterFile)
	if err != nil {
		return err
	}
	o.spec = spec
	return nil
}

// Validate checks the flags.
func (o *UpOptions) Validate() error {
	p, err := devcluster.ParseProfile(o.Profile)
	if err != nil {
		return err
	}
	o.profile = p
	if o.BasePort < 1024 || o.BasePort > 65535-devcluster.PortCount {
		return fmt.Errorf("--base-port %d: want 1024-%d", o.BasePort, 65535-devcluster.PortCount)
	}
	if o.RealNodes < 0 || o.RealNodes > 16 {
		return fmt.Errorf("--real-nodes %d: want 0-16", o.RealNodes)
	}
	if o.RealNodeGPUs < 1 || o.RealNodeGPUs > 64 {
		return fmt.Errorf("--real-node-gpus %d: want 1-64", o.RealNodeGPUs)
	}
	if o.peers, err = devcluster.SelectPeers(o.Integrations); err != nil {
		return err
	}
	o.schedulers = []devcluster.Scheduler{}
	for _, s := range o.Schedulers {
		switch sch := devcluster.Scheduler(s); {
		case s == "none" && len(o.Schedulers) > 1:
			return fmt.Errorf("--schedulers %s: none runs no scheduler; pass it alone", strings.Join(o.Schedulers, ","))
		case s == "none":
		case sch != devcluster.SchedulerLockstep && sch != devcluster.SchedulerKube:
			return fmt.Errorf("--schedulers: unknown scheduler %q: want lockstep, kube-scheduler or none", s)
		case slices.Contains(o.schedulers, sch):
			return fmt.Errorf("--schedulers: %s given twice: each scheduler runs once", s)
		default:
			o.schedulers = append(o.schedulers, sch)
		}
	}
	return nil
}

// Run starts the cluster; without --detach it then waits for Ctrl-C (or a
// component dying) and stops it.
func (o *UpOptions) Run(ctx context.Context, out io.Writer) error {
	start := time.Now()
	c, err := devcluster.Up(ctx, devcluster.Options{
		Dir: o.StateDir, BinDir: o.BinDir, Profile: o.profile, Spec: o.spec,
		BasePort: o.BasePort, Tied: !o.Detach, ReadyTimeout: o.Timeout, Progress: out, Schedulers: o.schedulers,
		SchedulerArgs: devcluster.PeerSchedulerArgs(o.peers), SchedulerFiles: devcluster.PeerSchedulerFiles(o.peers),
		RealNodes: o.RealNodes, RealNodeGPUs: o.RealNodeGPUs,
	})
	if err != nil {
		return err
	}
	for _, peer := range o.peers {
		fmt.Fprintf(out, "starting the %s controller (%s)\n", peer.Name, peer.Module)
		pctx, cancel := context.WithTimeout(ctx, o.Timeout)
		_, err := c.StartController(pctx, peer, filepath.Dir(o.BinDir))
		cancel()
		if err != nil {
			return errors.Join(fmt.Errorf("starting the %s controller: %w", peer.Name, err), c.Down())
		}
	}
	printSummary(out, c, time.Since(start))
	if o.Detach {
		exe, err := os.Executable()
		if err != nil {
			return errors.Join(err, c.Down())
		}
		if err := c.StartSupervisor(ctx, []string{exe, "dev", "supervise", "--state-dir", c.Dir()}); err != nil {
			return errors.Join(err, c.Down())
		}
		fmt.Fprintf(out, "components that exit are started again (log: %s)\n", filepath.Join(c.Dir(), "logs", "supervisor.log"))
		fmt.Fprintln(out, "stop it with: lockstep dev down")
		return nil
	}
	fmt.Fprintln(out, "running in the foreground, starting again any component that exits; Ctrl-C stops it")
	runErr := c.Supervise(ctx, out)
	fmt.Fprintln(out, "stopping the local cluster")
	if err := c.Down(); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

func printSummary(out io.Writer, c *devcluster.Cluster, took time.Duration) {
	o := c.Objects
	fmt.Fprintf(out, "local cluster ready in %s: profile %s, %d nodes, %d ResourceSlices, %d devices\n",
		took.Round(100*time.Millisecond), c.Profile(), len(o.Nodes), len(o.ResourceSlices), o.DeviceCount())
	fmt.Fprintf(out, "  API server:  %s\n", c.Server())
	fmt.Fprintf(out, "  kubeconfig:  %s\n", c.Kubeconfig())
	fmt.Fprintf(out, "  logs:        %s\n", filepath.Join(c.Dir(), "logs"))
	fmt.Fprintf(out, "  components:  %s\n", strings.Join(c.Components(), ", "))
	if real := c.RealNodes(); len(real) > 0 {
		fmt.Fprintf(out, "  real nodes:  %s (pods run as containers; image %s)\n", strings.Join(real, ", "), devcluster.RankImage)
	}
	fmt.Fprintf(out, "  try:         bin/kubectl --kubeconfig %s get nodes,resourceslices\n", c.Kubeconfig())
}

// BinDir is the directory of the running lockstep binary, where `make build`
// puts the Kubernetes binaries too.
func BinDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", err
	}
	return filepath.Dir(exe), nil
}
