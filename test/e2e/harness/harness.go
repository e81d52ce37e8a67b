package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// EnvKubeconfig names a running cluster to reuse instead of starting one.
const EnvKubeconfig = "LOCKSTEP_E2E_KUBECONFIG"

// Options configure the package's cluster.
type Options struct {
	Profile devcluster.Profile
	// Spec is the simulated cluster; nil is the default (3 nodes × 2 GPUs).
	Spec *clusterspec.Cluster
	// Schedulers to run; nil runs Lockstep's, empty runs none.
	Schedulers []devcluster.Scheduler
	// Bare: no Lockstep CRDs or RBAC either (the package installs them).
	Bare bool
	// ReadyTimeout bounds the cluster's start; zero is 3 minutes (large
	// simulated clusters take longer to populate).
	ReadyTimeout time.Duration
	// Controllers are other projects' controllers (JobSet, Kueue, …) to
	// run beside Lockstep, started in order once the cluster is up.
	Controllers []Controller
	// ComponentGates replace the profile's feature gates of some
	// components (devcluster.Options.ComponentGates).
	ComponentGates map[string]string
	// RealNodes and RealNodeGPUs: nodes whose pods run as real containers
	// (devcluster.Options.RealNodes).
	RealNodes, RealNodeGPUs int
}

// MustParseSpec parses a cluster spec for Options.Spec; it panics on a bad
// spec, which is a bug in the test package.
func MustParseSpec(yaml string) *clusterspec.Cluster {
	c, err := clusterspec.Parse([]byte(yaml))
	if err != nil {
		panic(fmt.Sprintf("invalid cluster spec in test: %v", err))
	}
	return c
}

// Harness is the cluster of one test package and its clients.
type Harness struct {
	// Cluster is nil when the harness reuses a cluster it did not start.
	Cluster    *devcluster.Cluster
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	Profile    devcluster.Profile
	// RepoRoot is the checkout the tests run in; BinDir is RepoRoot/bin.
	RepoRoot string
	BinDir   string
	// stops end what the harness started beside the cluster.
	stops []func()
}

var current *Harness

// Get returns the package's harness; it fails the test if Main did not run.
func Get(t testing.TB) *Harness {
	t.Helper()
	if current == nil {
		t.Fatal("harness: no cluster; call harness.Main from TestMain")
	}
	return current
}

// Main starts (or attaches to) the cluster, runs the tests, tears down, and
// exits with the tests' code.
func Main(m *testing.M, opts Options) {
	flag.Parse()
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts Options) int {
	h, teardown, err := setup(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness: cannot start the local control plane:", err)
		return 1
	}
	current = h
	code := m.Run()
	if err := teardown(code != 0); err != nil {
		fmt.Fprintln(os.Stderr, "harness: teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func setup(opts Options) (*Harness, func(failed bool) error, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	h := &Harness{RepoRoot: root, BinDir: filepath.Join(root, "bin"), Profile: opts.Profile}
	if kc := os.Getenv(EnvKubeconfig); kc != "" {
		if err := h.connect(kc); err != nil {
			return nil, nil, err
		}
		return h, func(bool) error { return nil }, h.checkProfile()
	}
	c, err := startCluster(root, h.BinDir, opts)
	if err != nil {
		return nil, nil, err
	}
	h.Cluster = c
	if err := h.connect(c.Kubeconfig()); err != nil {
		_ = c.Down()
		return nil, nil, err
	}
	for _, ctl := range opts.Controllers {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		err := h.StartController(ctx, ctl)
		cancel()
		if err != nil {
			h.stop()
			_ = c.Down()
			return nil, nil, fmt.Errorf("starting the %s controller: %w", ctl.Name, err)
		}
		fmt.Fprintf(os.Stderr, "harness: %s controller running\n", ctl.Name)
	}
	teardown := func(failed bool) error {
		h.stop()
		if failed {
			fmt.Fprintf(os.Stderr, "harness: tests failed; component logs kept in %s\n", filepath.Join(c.Dir(), "logs"))
		}
		if err := c.Down(); err != nil {
			return err
		}
		if !failed {
			return os.RemoveAll(c.Dir())
		}
		return nil
	}
	return h, teardown, nil
}

func (h *Harness) stop() {
	for i := len(h.stops) - 1; i >= 0; i-- {
		h.stops[i]()
	}
	h.stops = nil
}

// startCluster starts a cluster on free loopback ports in a fresh directory
// under .lockstep/e2e, retrying if another package grabbed the ports first.
func startCluster(root, bin string, opts Options) (*devcluster.Cluster, error) {
	if err := os.MkdirAll(filepath.Join(root, ".lockstep", "e2e"), 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		dir, err := os.MkdirTemp(filepath.Join(root, ".lockstep", "e2e"), "cluster-")
		if err != nil {
			return nil, err
		}
		ready := opts.ReadyTimeout
		if ready == 0 {
			ready = 3 * time.Minute
		}
		ctx, cancel := context.WithTimeout(context.Background(), ready+time.Minute)
		c, err := devcluster.Up(ctx, devcluster.Options{
			Dir: dir, BinDir: bin, Profile: opts.Profile, Spec: opts.Spec, ReadyTimeout: ready,
			BasePort: FreeBasePort(), Tied: true, Progress: os.Stderr, Schedulers: opts.Schedulers, Bare: opts.Bare, ComponentGates: opts.ComponentGates,
			SchedulerArgs: devcluster.PeerSchedulerArgs(opts.Controllers), SchedulerFiles: devcluster.PeerSchedulerFiles(opts.Controllers),
			RealNodes: opts.RealNodes, RealNodeGPUs: opts.RealNodeGPUs,
		})
		cancel()
		if err == nil {
			return c, nil
		}
		lastErr = err
		// Another package may grab a port between the check and the bind.
		if !errors.Is(err, devcluster.ErrPortInUse) && !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, lastErr
}

// FreeBasePort finds enough consecutive free loopback ports.
//
// Ports are drawn from 20000-32000, below Linux's ephemeral range
// (32768-60999), where outgoing connections would otherwise take them.
func FreeBasePort() int { return FreePorts(devcluster.PortCount) }

// FreePorts returns the first of n consecutive free ports, picked at random
// (the demo runs its clusters side by side, on demo.PortCount ports).
func FreePorts(n int) int {
	for {
		base := 20000 + rand.IntN(12000)
		free := true
		for p := base; p < base+n && free; p++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				free = false
				continue
			}
			_ = ln.Close()
		}
		if free {
			return base
		}
	}
}

func (h *Harness) connect(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	h.Kubeconfig, h.Config = kubeconfig, cfg
	if h.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	h.Dynamic, err = dynamic.NewForConfig(cfg)
	return err
}

// checkProfile refuses a reused cluster whose API does not match the profile
// the package needs, instead of failing its tests in confusing ways.
func (h *Harness) checkProfile() error {
	served, err := ServesGroupVersion(h.Client, "scheduling.k8s.io/v1beta1", "podgroups")
	if err != nil {
		return err
	}
	if want := h.Profile == devcluster.ProfileUpstream; served != want {
		return fmt.Errorf("%s=%s: cluster does not match profile %q (scheduling.k8s.io/v1beta1 podgroups served: %v)",
			EnvKubeconfig, h.Kubeconfig, h.Profile, served)
	}
	return nil
}

// RepoRoot walks up from the working directory to the Lockstep module root.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && len(b) > 0 && containsModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the lockstep checkout")
		}
		dir = parent
	}
}

func containsModule(gomod []byte) bool {
	const want = "module github.com/lockstep-dev/lockstep\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

// ExampleCluster loads a cluster spec from the checkout's examples/clusters
// (a test package runs on the file users read); it panics when the file is
// missing or invalid, a bug in the checkout.
func ExampleCluster(file string) *clusterspec.Cluster {
	root, err := RepoRoot()
	if err != nil {
		panic(err)
	}
	c, err := clusterspec.Load(filepath.Join(root, "examples", "clusters", file))
	if err != nil {
		panic(fmt.Sprintf("examples/clusters/%s: %v", file, err))
	}
	return c
}
