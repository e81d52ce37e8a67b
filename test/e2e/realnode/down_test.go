package realnode

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestDownLeavesNothingBehind starts a second cluster with a real node,
// runs a rank on it, and stops it: no process of the node (kubelet,
// containerd, shims, the rank), no mount under its directory, no cgroup, no
// bridge and no log link is left. The same after a `dev up` that fails once
// its real node is running (a scheduler that cannot start).
func TestDownLeavesNothingBehind(t *testing.T) {
	h := harness.Get(t)
	for _, tc := range []struct {
		name string
		// fail makes Up fail after the real node started.
		fail bool
	}{
		{name: "dev down"},
		{name: "a failed dev up", fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := harness.Context(t, 4*time.Minute)
			dir := t.TempDir()
			port := harness.FreeBasePort()
			opts := devcluster.Options{Dir: dir, BinDir: h.BinDir, Profile: devcluster.ProfileEKS, BasePort: port, Tied: true,
				RealNodes: 1, RealNodeGPUs: 1, ReadyTimeout: 2 * time.Minute}
			if tc.fail {
				opts.SchedulerArgs = []string{"--no-such-flag"}
			}
			c, err := devcluster.Up(ctx, opts)
			if tc.fail {
				if err == nil {
					_ = c.Down()
					t.Fatal("dev up with a scheduler that cannot start succeeded")
				}
				t.Logf("dev up failed as it should: %v", firstLine(err.Error()))
			} else {
				if err != nil {
					t.Fatal(err)
				}
				runOneRank(t, ctx, c)
				if err := c.Down(); err != nil {
					t.Fatalf("dev down: %v", err)
				}
			}
			assertNothingLeft(t, dir, port)
			assertNothingLeft(t, filepath.Join(os.TempDir(), "lockstep-"+strconv.Itoa(port)+"-"+devcluster.RealNodeName(0)), port)
		})
	}
}

// runOneRank runs a one-rank Job on the cluster's real node and waits until
// its process runs.
func runOneRank(t *testing.T, ctx context.Context, c *devcluster.Cluster) {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := &harness.Harness{Client: client, Cluster: c}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "down"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the default ServiceAccount", func(ctx context.Context) (bool, string, error) {
		_, err := client.CoreV1().ServiceAccounts("down").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, "", nil
	})
	rankJob(t, ctx, o, "down", "one", 1, 1, func(*batchv1.Job) {})
	ranks := waitRanks(t, ctx, o, "down", "one", 1, nil)
	harness.Eventually(t, ctx, "the rank's process", func(context.Context) (bool, string, error) {
		return len(rankProcesses(podNames(ranks)[0])) > 0, "", nil
	})
}

// assertNothingLeft checks that nothing of the real node of the cluster in
// dir (API server port port) is left on this machine.
func assertNothingLeft(t *testing.T, dir string, port int) {
	t.Helper()
	node := devcluster.RealNodeName(0)
	// Processes: anything whose command line or working files name dir.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmd) == 0 {
			continue
		}
		if strings.Contains(string(cmd), dir) {
			t.Errorf("process %s left: %s", e.Name(), strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	// Mounts under dir.
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			t.Errorf("mount left: %s", fields[4])
		}
	}
	// Cgroups in every hierarchy.
	cg := "lockstep-" + strconv.Itoa(port) + "-" + node
	cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cg)
	if _, err := os.Stat("/sys/fs/cgroup/" + cg); err == nil {
		cgs = append(cgs, "/sys/fs/cgroup/"+cg)
	}
	for _, cg := range cgs {
		t.Errorf("cgroup left: %s", cg)
	}
	// The bridge.
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if i.Name == "ls"+strconv.Itoa(port)+"r0" {
				t.Errorf("bridge left: %s", i.Name)
			}
		}
	}
	// Log links into the node's directory.
	links, _ := os.ReadDir("/var/log/containers")
	for _, l := range links {
		if target, err := os.Readlink(filepath.Join("/var/log/containers", l.Name())); err == nil && strings.HasPrefix(target, dir) {
			t.Errorf("log link left: %s -> %s", l.Name(), target)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
