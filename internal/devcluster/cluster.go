package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/devcluster/gpudriver"
	"github.com/lockstep-dev/lockstep/internal/webhook"
	webhookconfig "github.com/lockstep-dev/lockstep/internal/webhook/config"
)

// DefaultBasePort is the kube-apiserver port of `lockstep dev up`; the other
// components use the next few ports (see PortsFrom).
const DefaultBasePort = 16443

// Options configure Up.
type Options struct {
	// Dir is the state directory (kubeconfig, pki, etcd data, logs).
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kwok.
	BinDir string
	// Profile selects the feature gates.
	Profile Profile
	// Spec is the simulated cluster; nil means clusterspec.Default().
	Spec *clusterspec.Cluster
	// BasePort is the API server port; the others follow it.
	BasePort int
	// Tied kills the components when the calling process dies (tests,
	// foreground `dev up`). Detached clusters outlive their creator.
	Tied bool
	// ReadyTimeout bounds the wait for a healthy, populated cluster.
	ReadyTimeout time.Duration
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Schedulers to run; nil means just Lockstep's. Lockstep's CRDs and RBAC
	// are installed whatever runs.
	Schedulers []Scheduler
	// Bare skips installing Lockstep's CRDs and RBAC (a test installs
	// Lockstep itself, e.g. from the Helm chart); Schedulers must be empty.
	Bare bool
	// ComponentGates replace the profile's feature gates of the components
	// they name ("kube-apiserver", "kube-controller-manager",
	// "kube-scheduler"; "" for every gate at its default): a control plane
	// whose components disagree, as a self-managed one can.
	ComponentGates map[string]string
	// SchedulerArgs are appended to Lockstep's scheduler's command line
	// (`dev up --integrations kueue` turns on its Kueue placement check).
	SchedulerArgs []string
	// SchedulerFiles are written into the state directory before the
	// scheduler starts (name → content), for SchedulerArgs to name.
	SchedulerFiles map[string]string
	// RealNodes is how many nodes run pods as real containers (a kubelet,
	// containerd and the simulated-GPU DRA driver each, see realnode.go)
	// beside the simulated ones; 0 runs none.
	RealNodes int
	// RealNodeGPUs is how many simulated GPUs each real node's driver
	// publishes; default 2.
	RealNodeGPUs int
}

func (o *Options) complete() error {
	if o.Dir == "" {
		return errors.New("state directory is required")
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	o.Dir = abs
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return err
	}
	if o.Profile == "" {
		o.Profile = ProfileEKS
	}
	if _, err := ParseProfile(string(o.Profile)); err != nil {
		return err
	}
	if o.Spec == nil {
		o.Spec = clusterspec.Default()
	}
	if o.BasePort == 0 {
		o.BasePort = DefaultBasePort
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 3 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Schedulers == nil {
		o.Schedulers = []Scheduler{SchedulerLockstep}
	}
	if o.RealNodes < 0 {
		return fmt.Errorf("real nodes: %d, want 0 or more", o.RealNodes)
	}
	if o.RealNodeGPUs == 0 {
		o.RealNodeGPUs = 2
	}
	if o.RealNodes > 0 {
		return CanRunRealNodes(o.BinDir)
	}
	return nil
}

// Cluster is a running local control plane.
type Cluster struct {
	layout  layout
	Objects *clusterspec.Objects
	// mu guards writes of state (its processes' pids) and state.json.
	mu    sync.Mutex
	state *state
}

// Kubeconfig is the path of the admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.layout.adminKubeconfig() }

// KubeconfigFor is the path of the kubeconfig of a control-plane identity:
// "kube-scheduler", "kube-controller-manager", "kwok" or "admin".
func (c *Cluster) KubeconfigFor(user string) string { return c.layout.kubeconfig(user) }

// Dir is the state directory.
func (c *Cluster) Dir() string { return c.layout.dir }

// Server is the API server URL.
func (c *Cluster) Server() string { return c.state.Server }

// Profile is the profile the cluster runs with.
func (c *Cluster) Profile() Profile { return c.state.Profile }

// RESTConfig is an admin client configuration for the cluster.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Up starts a cluster in opts.Dir and returns once the API server is healthy,
// every node is Ready and every ResourceSlice exists. On failure it stops
// whatever it started and returns a *ComponentError naming the culprit when
// one component is to blame.
func Up(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	l := layout{dir: opts.Dir}
	if err := refuseIfRunning(l); err != nil {
		return nil, err
	}
	ports := PortsFrom(opts.BasePort)
	if err := checkPorts(ports); err != nil {
		return nil, err
	}
	objs, err := clusterspec.Render(opts.Spec)
	if err != nil {
		return nil, err
	}
	if err := resetDir(l); err != nil {
		return nil, err
	}
	var nodes []*realNode
	if opts.RealNodes > 0 {
		if nodes, err = planRealNodes(l, opts.RealNodes, ports.APIServer); err != nil {
			return nil, err
		}
	}
	server := "https://127.0.0.1:" + strconv.Itoa(ports.APIServer)
	extra := []identity{}
	for _, n := range nodes {
		extra = append(extra, nodeIdentity(n.Name))
	}
	if len(nodes) > 0 {
		extra = append(extra, kubeletClientIdentity)
		objs.EnsureDeviceClass(gpudriver.DefaultDriver)
	}
	if err := writeCredentials(l, server, extra...); err != nil {
		return nil, fmt.Errorf("writing credentials: %w", err)
	}
	if err := writeStages(l); err != nil {
		return nil, err
	}
	c := &Cluster{layout: l, Objects: objs, state: &state{
		Profile: opts.Profile, Server: server, Ports: ports, Kubeconfig: l.adminKubeconfig(), Tied: opts.Tied, RealNodes: nodes,
	}}
	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := c.boot(ctx, opts); err != nil {
		logger.V(2).Info("Local cluster failed to start; stopping what was started", "err", err)
		_ = c.stopAll()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) boot(ctx context.Context, opts Options) error {
	l, bin, ports := c.layout, opts.BinDir, c.state.Ports
	fmt.Fprintf(opts.Progress, "starting etcd on 127.0.0.1:%d\n", ports.EtcdClient)
	etcd := etcdProcess(l, bin, ports)
	if err := c.launch(etcd, opts.Tied); err != nil {
		return err
	}
	if err := c.waitFor(ctx, etcd, "etcd healthy", func(ctx context.Context) error { return etcdHealthy(ctx, ports.EtcdClient) }); err != nil {
		return err
	}
	fmt.Fprintf(opts.Progress, "starting kube-apiserver on %s (profile %s)\n", c.state.Server, c.state.Profile)
	apiserver := withGates(apiserverProcess(l, bin, ports, opts.Profile), opts.ComponentGates)
	if len(c.state.RealNodes) > 0 {
		apiserver.Args = append(apiserver.Args, realNodeAPIServerArgs(l)...)
	}
	if err := c.launch(apiserver, opts.Tied); err != nil {
		return err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, apiserver, "API server ready", func(ctx context.Context) error { return apiReady(ctx, client) }); err != nil {
		return err
	}
	fmt.Fprintln(opts.Progress, "starting kube-controller-manager and kwok (node simulator)")
	kwok := simulatorProcess(l, bin, ports)
	if len(c.state.RealNodes) > 0 {
		kwok.Args = simulateOnlyFakeNodes(kwok.Args)
	}
	for _, p := range []*process{withGates(controllerManagerProcess(l, bin, ports, opts.Profile), opts.ComponentGates), kwok} {
		if err := c.launch(p, opts.Tied); err != nil {
			return err
		}
	}
	fmt.Fprintf(opts.Progress, "creating %d nodes, %d ResourceSlices (%d devices), %d DeviceClasses\n",
		len(c.Objects.Nodes), len(c.Objects.ResourceSlices), c.Objects.DeviceCount(), len(c.Objects.DeviceClasses))
	if err := c.waitFor(ctx, apiserver, "cluster objects created", newObjectCreator(client, c.Objects).create); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if !opts.Bare {
		if err := c.waitFor(ctx, apiserver, "Lockstep CRDs and RBAC installed", func(ctx context.Context) error { return InstallLockstep(ctx, dyn, client) }); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, nil, "nodes Ready, slices published, service accounts issued", func(ctx context.Context) error {
		return clusterReady(ctx, client, c.Objects)
	}); err != nil {
		return err
	}
	if n := len(c.state.RealNodes); n > 0 {
		fmt.Fprintf(opts.Progress, "starting %d real node(s): kubelet, containerd and the simulated-GPU DRA driver, %d GPUs each\n", n, opts.RealNodeGPUs)
		if err := c.startRealNodes(ctx, opts, client); err != nil {
			return err
		}
	}
	for _, sched := range opts.Schedulers {
		if sched == SchedulerKube {
			fmt.Fprintln(opts.Progress, "starting kube-scheduler")
			if err := c.launch(withGates(kubeSchedulerProcess(l, bin, ports, opts.Profile), opts.ComponentGates), opts.Tied); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(opts.Progress, "starting lockstep webhook, controllers and scheduler")
		// What the Helm chart ships: the policy that confines the webhook
		// to its CA bundle, the webhook configurations and the Secret the
		// webhook keeps its certificate in. The webhook runs as the client
		// certificate user webhookUser here (config/rbac binds it beside
		// the chart's ServiceAccount).
		endpoint := webhookconfig.Endpoint{URL: "https://127.0.0.1:" + strconv.Itoa(ports.Webhook)}
		webhookUsers := []string{webhookconfig.WebhookServiceAccount(LockstepNamespace), webhookUser}
		if err := webhook.Install(ctx, client, endpoint, LockstepNamespace, WebhookSecret, webhookUsers); err != nil {
			return fmt.Errorf("installing the webhook configurations: %w", err)
		}
		for name, content := range opts.SchedulerFiles {
			if err := os.WriteFile(c.layout.path(name), []byte(content), 0o644); err != nil {
				return err
			}
		}
		procs := c.lockstepProcesses(bin, opts.SchedulerArgs)
		for _, p := range procs {
			if err := c.launch(p, opts.Tied); err != nil {
				return err
			}
		}
		if err := c.waitFor(ctx, procs[0], "Lockstep webhook serving", func(ctx context.Context) error { return componentReady(ctx, ports.WebhookHealth) }); err != nil {
			return err
		}
	}
	// A scheduler that crashes at start (bad flags, missing RBAC) is caught here.
	time.Sleep(300 * time.Millisecond)
	return c.Failed()
}

// launch starts a process and records it before anything else can fail, so
// that Down always knows about it.
func (c *Cluster) launch(p *process, tied bool) error {
	if err := p.start(tied); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Processes = append(c.state.Processes, p)
	return writeState(c.layout.dir, c.state)
}

// waitFor polls check until it succeeds, ctx ends, or a component dies. A dead
// component is reported with its log; a timeout blames primary (or the first
// component still running, when primary is nil) with the last check error.
func (c *Cluster) waitFor(ctx context.Context, primary *process, what string, check func(context.Context) error) error {
	var last error
	for {
		if err := c.Failed(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			blame := primary
			if blame == nil && len(c.state.Processes) > 0 {
				blame = c.state.Processes[len(c.state.Processes)-1]
			}
			err := fmt.Errorf("timed out waiting for %s: %w", what, last)
			if blame == nil {
				return err
			}
			return &ComponentError{Component: blame.Name, Log: blame.Log, Tail: blame.logTail(30), Err: err}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Failed returns a *ComponentError for the first component that is no longer
// running, or nil when all are.
func (c *Cluster) Failed() error {
	for _, p := range c.state.Processes {
		if !p.alive() {
			return &ComponentError{Component: p.Name, Log: p.Log, Tail: p.logTail(30), Err: errors.New("process exited")}
		}
	}
	return nil
}

// LogTail returns the last n lines of a component's log.
func (c *Cluster) LogTail(component string, n int) string { return c.LogLines(component, "", n) }

// LogLines is the last n lines of a component's log that contain match
// ("": any line), "" when the component does not run.
func (c *Cluster) LogLines(component, match string, n int) string {
	for _, p := range c.state.Processes {
		if p.Name == component {
			return p.logLines(match, n)
		}
	}
	return ""
}

// PID is the process ID of a running component, or 0 when it does not run.
func (c *Cluster) PID(component string) int {
	if p := c.process(component); p != nil {
		return p.PID
	}
	return 0
}

// Components names the running components in start order.
func (c *Cluster) Components() []string {
	names := make([]string, 0, len(c.state.Processes))
	for _, p := range c.state.Processes {
		names = append(names, p.Name)
	}
	return names
}

// Down stops every component and removes the cluster state (logs are kept).
func (c *Cluster) Down() error {
	if err := c.stopAll(); err != nil {
		return err
	}
	return clearState(c.layout)
}

// stopAll stops the components in reverse start order, so that nothing
// outlives what it depends on.
func (c *Cluster) stopAll() error {
	var errs []error
	for i := len(c.state.Processes) - 1; i >= 0; i-- {
		if err := c.state.Processes[i].stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// What real nodes' processes leave behind: containers, mounts, cgroups.
	for _, n := range c.state.RealNodes {
		if err := n.teardown(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// supervisorGrace is how long Down lets a supervisor take to exit: a
// foreground `dev up` told to stop stops its whole cluster first.
const supervisorGrace = 2 * time.Minute

// Down stops the cluster recorded in dir by another process: its
// supervisor first, so that nothing is started again, then every
// component.
func Down(dir string) error {
	l := layout{dir: dir}
	s, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w in %s", errNoCluster, dir)
	}
	if err != nil {
		return err
	}
	if sup := s.Supervisor; sup != nil && sup.alive() {
		if err := sup.stop(supervisorGrace); err != nil {
			return err
		}
		// It may have restarted components (new pids), or, as a
		// foreground `dev up`, stopped the cluster itself.
		s, err = readState(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	c := &Cluster{layout: l, state: s}
	return c.Down()
}

// IsNoCluster reports whether Down found nothing to stop.
func IsNoCluster(err error) bool { return errors.Is(err, errNoCluster) }

func refuseIfRunning(l layout) error {
	s, err := readState(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	procs := s.Processes
	if s.Supervisor != nil {
		procs = append(procs, s.Supervisor)
	}
	for _, p := range procs {
		if p.alive() {
			return fmt.Errorf("%w in %s (%s, API server %s); stop it with `lockstep dev down` first",
				ErrAlreadyUp, l.dir, p.describe(), s.Server)
		}
	}
	// Stale state: every process is gone. A real node's containers may
	// not be (their shims outlive containerd); they go now.
	var errs []error
	for _, n := range s.RealNodes {
		if err := n.teardown(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkPorts(p Ports) error {
	for _, c := range p.byComponent() {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)))
		if err != nil {
			return fmt.Errorf("%w: 127.0.0.1:%d is needed for %s but is taken by another process; free it or pick other ports with --base-port", ErrPortInUse, c.port, c.name)
		}
		_ = ln.Close()
	}
	return nil
}

// resetDir empties the state directory but keeps old logs, renamed, for a
// look at what happened last time.
func resetDir(l layout) error {
	if err := clearState(l); err != nil {
		return err
	}
	if err := os.MkdirAll(l.logs(), 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(l.logs())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".log" {
			old := l.path("logs", e.Name())
			if err := os.Rename(old, old+".previous"); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearState removes everything in the state directory except logs/.
func clearState(l layout) error {
	entries, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "logs" {
			continue
		}
		if err := os.RemoveAll(l.path(e.Name())); err != nil {
			return err
		}
	}
	return nil
}
