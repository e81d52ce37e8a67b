//go:build sizing

// Package sizing measures what Lockstep's three components need in memory
// and CPU on a cluster of LOCKSTEP_SIZING_NODES simulated nodes (default
// 1,000), each with 8 GPUs published in a ResourceSlice, zoned and racked
// like a real GPU fleet: idle after their caches sync, and while a wave of
// gang Jobs is admitted, scheduled and bound. `make sizing` runs it at 1,000
// and 5,000 nodes; docs/install.md carries the figures. It prints figures and
// fails only when the wave does not schedule.
package sizing

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// The wave: jobs gang Jobs of ranks pods, each rank 8 CPUs and one GPU.
const (
	jobs  = 32
	ranks = 32
)

var components = []string{"lockstep-scheduler", "lockstep-webhook", "lockstep-controllers"}

func nodes() int {
	if n, err := strconv.Atoi(os.Getenv("LOCKSTEP_SIZING_NODES")); err == nil && n > 0 {
		return n
	}
	return 1000
}

func TestMain(m *testing.M) {
	spec := fmt.Sprintf(`
nodePools:
- name: gpu
  count: %d
  capacity: {cpu: "96", memory: 1Ti, pods: "110", ephemeral-storage: 2Ti}
  labels:
    node.kubernetes.io/instance-type: sim.p5.48xlarge
    topology.kubernetes.io/zone: "zone-{{div .Index 500}}"
    example.com/rack: "rack-{{div .Index 16}}"
  devices:
  - driver: gpu.example.com
    count: 8
    attributes:
      model: {string: H100}
      index: {int: "{{.Index}}"}
    capacity: {memory: 80Gi}
`, nodes())
	harness.Main(m, harness.Options{
		Profile:      devcluster.ProfileEKS,
		Spec:         harness.MustParseSpec(spec),
		ReadyTimeout: 15 * time.Minute,
	})
}

// usage is one component's resource use: resident memory now and at its
// peak, and CPU time consumed so far.
type usage struct {
	rss, peak int64 // bytes
	cpu       time.Duration
}

func TestSizing(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 30*time.Minute)
	pids := map[string]int{}
	for _, c := range components {
		if pids[c] = h.Cluster.PID(c); pids[c] == 0 {
			t.Fatalf("%s is not running", c)
		}
	}
	sample := func() map[string]usage {
		out := map[string]usage{}
		for c, pid := range pids {
			u, err := read(pid)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			out[c] = u
		}
		return out
	}

	// Idle: caches synced, nothing to schedule, a minute of background work
	// (resyncs, lease renewals, certificate checks).
	waitSchedulerReady(t, ctx, h)
	const idleFor = time.Minute
	before := sample()
	time.Sleep(idleFor)
	idle := sample()

	// The wave: jobs × ranks pods through the webhook, the Job integration,
	// the scheduler's gang cycles and binds.
	ns := h.Namespace(t)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "8").ClaimTemplate("gpu", "one-gpu").Obj()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for i := 0; i < jobs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := builders.IndexedJob(ns, fmt.Sprintf("train-%02d", i), ranks, pod)
			if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, fmt.Sprintf("%d pods bound", jobs*ranks), func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName != "" {
				bound++
			}
		}
		return bound == jobs*ranks, fmt.Sprintf("%d of %d pods created, %d bound", len(pods.Items), jobs*ranks, bound), nil
	})
	took := time.Since(start)
	wave := sample()

	host, _ := os.Hostname()
	fmt.Printf("\nLockstep at %d nodes × 8 GPUs (%d ResourceSlices); %s, %d CPUs\n", nodes(), nodes(), host, runtime.NumCPU())
	fmt.Printf("wave: %d gang Jobs × %d ranks (8 CPU + 1 GPU claim each) bound in %s\n\n", jobs, ranks, took.Round(time.Second))
	fmt.Printf("%-22s %12s %12s %14s %14s %12s\n", "COMPONENT", "IDLE RSS", "IDLE CPU", "WAVE CPU", "WAVE CPU AVG", "PEAK RSS")
	for _, c := range components {
		idleCores := float64(idle[c].cpu-before[c].cpu) / float64(idleFor)
		waveCPU := wave[c].cpu - idle[c].cpu
		fmt.Printf("%-22s %10.0fMi %9.0fm %13.1fs %13.0fm %10.0fMi\n", c,
			mi(idle[c].rss), 1000*idleCores, waveCPU.Seconds(), 1000*float64(waveCPU)/float64(took), mi(wave[c].peak))
	}
	fmt.Println()
}

func mi(b int64) float64 { return float64(b) / (1 << 20) }

func waitSchedulerReady(t *testing.T, ctx context.Context, h *harness.Harness) {
	t.Helper()
	harness.Eventually(t, ctx, "scheduler ready (caches synced)", func(ctx context.Context) (bool, string, error) {
		err := h.Cluster.Ready(ctx, "lockstep-scheduler")
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// read takes a process's resident and peak memory from /proc/PID/status and
// its CPU time (user + system) from /proc/PID/stat.
func read(pid int) (usage, error) {
	var u usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			u.rss = kb << 10
		case "VmHWM:":
			u.peak = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(rest) < 13 {
		return u, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(rest[11], 10, 64)
	stime, _ := strconv.ParseInt(rest[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	u.cpu = time.Duration(utime+stime) * time.Second / ticksPerSecond
	return u, nil
}
