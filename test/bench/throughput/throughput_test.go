//go:build bench

// Package throughput measures how fast the scheduler binds DRA gangs on the
// local control plane (100 nodes × 8 GPUs), each pod with its own one-GPU
// claim: 50 gangs of 8 pods, and one gang of 512. With LOCKSTEP_BENCH_BASELINE
// set to another lockstep binary, the two run interleaved on the same
// cluster and the figures are printed side by side. It prints figures and
// never fails on time.
package throughput

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const spec = `
nodePools:
- name: gpu
  count: 100
  capacity: {cpu: "64", memory: 512Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 8
`

const rounds = 3

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec), Schedulers: []devcluster.Scheduler{}, ReadyTimeout: 5 * time.Minute})
}

type result struct {
	// all: first pod created → every pod bound; afterLast: last pod
	// created → every pod bound; firstGang: first pod created → first
	// gang wholly bound.
	all, afterLast, firstGang time.Duration
}

func TestManySmallGangs(t *testing.T) { sideBySide(t, 50, 8) }

func TestOneLargeGang(t *testing.T) { sideBySide(t, 1, 512) }

func sideBySide(t *testing.T, gangs, ranks int) {
	h := harness.Get(t)
	variants := []struct{ name, binary string }{{"this build", h.BinDir + "/lockstep"}}
	if b := os.Getenv("LOCKSTEP_BENCH_BASELINE"); b != "" {
		variants = append([]struct{ name, binary string }{{"baseline", b}}, variants...)
	}
	results := map[string][]result{}
	for round := 0; round < rounds; round++ {
		for _, v := range variants {
			r := runWave(t, h, v.binary, fmt.Sprintf("%s-%d-%d", map[string]string{"baseline": "base", "this build": "this"}[v.name], gangs, round), gangs, ranks)
			t.Logf("round %d, %s: all bound %s, after the last pod %s, first gang %s", round, v.name, r.all, r.afterLast, r.firstGang)
			results[v.name] = append(results[v.name], r)
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("\n%d gangs × %d one-GPU DRA pods on 100 nodes × 8 GPUs (median of %d, interleaved; %s, %d CPUs):\n", gangs, ranks, rounds, host, runtime.NumCPU())
	fmt.Printf("  %-12s %14s %18s %12s %10s\n", "scheduler", "all bound", "after last pod", "first gang", "pods/s")
	for _, v := range variants {
		m := medians(results[v.name])
		fmt.Printf("  %-12s %14s %18s %12s %10.0f\n", v.name, m.all.Round(time.Millisecond), m.afterLast.Round(time.Millisecond), m.firstGang.Round(time.Millisecond), float64(gangs*ranks)/m.all.Seconds())
	}
	fmt.Println()
}

// runWave starts the scheduler binary, creates the wave in a fresh
// namespace and times it; the namespace is emptied before it returns so the
// next wave finds every GPU free.
func runWave(t *testing.T, h *harness.Harness, binary, identity string, gangs, ranks int) result {
	ctx := harness.Context(t, 10*time.Minute)
	ns := h.Namespace(t)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < gangs; g++ {
		h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, fmt.Sprintf("g%02d", g), int32(ranks)))
	}
	sched := h.StartSchedulerBinary(t, binary, identity, nil, "--leader-elect=false")
	defer func() { _ = sched.Cmd.Process.Kill(); <-sched.Done }()
	time.Sleep(3 * time.Second) // caches synced before the clock starts

	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				g := i / ranks
				p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("g%02d-%d", g, i%ranks)).Member(fmt.Sprintf("g%02d", g)).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
				if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := 0; i < gangs*ranks; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	lastCreated := time.Now()
	var r result
	harness.Eventually(t, ctx, "every pod bound", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		perGang := map[string]int{}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
				perGang[p.Labels["scheduling.lockstep.dev/pod-group"]]++
			}
		}
		if r.firstGang == 0 {
			for _, n := range perGang {
				if n == ranks {
					r.firstGang = time.Since(start)
					break
				}
			}
		}
		return bound == gangs*ranks, fmt.Sprintf("%d of %d bound", bound, gangs*ranks), nil
	})
	r.all, r.afterLast = time.Since(start), time.Since(lastCreated)
	if err := h.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the wave's pods and claims gone", func(ctx context.Context) (bool, string, error) {
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(claims.Items) == 0 && len(pods.Items) == 0, fmt.Sprintf("%d pods, %d claims", len(pods.Items), len(claims.Items)), nil
	})
	return r
}

func medians(rs []result) result {
	pick := func(f func(result) time.Duration) time.Duration {
		xs := make([]time.Duration, 0, len(rs))
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
		return xs[len(xs)/2]
	}
	return result{
		all:       pick(func(r result) time.Duration { return r.all }),
		afterLast: pick(func(r result) time.Duration { return r.afterLast }),
		firstGang: pick(func(r result) time.Duration { return r.firstGang }),
	}
}
