//go:build bench

// Package throughput measures, side by side on one local control plane
// (upstream profile: kube-apiserver, etcd and kube-controller-manager
// v1.37 with the in-tree workload gates on), how fast kube-scheduler 1.37's
// in-tree gang scheduling (scheduling.k8s.io/v1beta1 PodGroups) and
// Lockstep bind the same workloads. Each variant runs in turn, in fresh
// namespaces, for a number of rounds (interleaved), and the medians are
// printed in one table with Lockstep's ratios. It prints figures and never
// fails on time.
//
// LOCKSTEP_BENCH_NODES (default 100) sizes the cluster (nodes × 8 GPUs, in
// racks of 20 nodes: node label example.com/rack; zones of 2 racks:
// topology.kubernetes.io/zone); the scenarios are chosen by size: below
// 1,000 nodes, 50 gangs × 8 one-GPU DRA ranks (by a claim template, then by
// an extended resource backed by DRA) and 10 scheduling trees (tree_test.go);
// at 1,000 or more, one 1,024-rank DRA gang and 1,000 lone one-GPU pods;
// from 200 on, 20 gangs × 32 ranks each required in one rack
// (topology_test.go).
// LOCKSTEP_BENCH_BASELINE=<lockstep binary> adds another Lockstep build.
package throughput

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// nodes is the cluster's size (LOCKSTEP_BENCH_NODES).
var nodes = func() int {
	if n, err := strconv.Atoi(os.Getenv("LOCKSTEP_BENCH_NODES")); err == nil && n > 0 {
		return n
	}
	return 100
}()

// specFmt: racks of rackSize nodes, zones of zoneSize nodes (2 racks).
// No default scoring of kube-scheduler reads either label for these bare
// pods (the rack key is unknown to it; the system default spreading over
// the zone applies only to pods a Service, ReplicaSet, StatefulSet or
// ReplicationController selects) and Lockstep reads them only where a
// group asks, so the scenarios without topology are unchanged.
const specFmt = `
nodePools:
- name: gpu
  count: %d
  capacity: {cpu: "64", memory: 512Gi, pods: "110"}
  labels: {example.com/rack: "rack-{{div .Index 20}}", topology.kubernetes.io/zone: "zone-{{div .Index 40}}"}
  devices:
  - driver: gpu.example.com
    count: 8
`

// rounds per variant (LOCKSTEP_BENCH_ROUNDS, default 3).
var rounds = func() int {
	if n, err := strconv.Atoi(os.Getenv("LOCKSTEP_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}()

const extendedGPU = corev1.ResourceName("example.com/gpu")

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileUpstream, Spec: harness.MustParseSpec(fmt.Sprintf(specFmt, nodes)),
		Schedulers: []devcluster.Scheduler{}, ReadyTimeout: time.Duration(5+nodes/200) * time.Minute})
}

// workload is one scenario: groups × ranks pods (groups of one rank and no
// PodGroup when lone), each with one GPU.
type workload struct {
	name          string
	groups, ranks int
	lone          bool
	// extended: the GPU is asked as example.com/gpu (a DeviceClass's
	// extendedResourceName), not by a claim template.
	extended bool
	// existing: the pods (and their claims) exist before the scheduler
	// starts.
	existing bool
	// ceiling, when measured, is the API server's write ceiling in pods/s
	// (writeCeiling).
	ceiling float64
	// topology, when set, is the node label key each gang is required
	// within (spec.schedulingConstraints.topology of either PodGroup API);
	// each wave checks that every gang was kept in one of its domains.
	topology string
	// children, when set, makes the groups scheduling trees (tree_test.go):
	// every children consecutive groups are the child groups of one root
	// CompositePodGroup (a gang of all its children) required in one domain
	// of zone, each child required in one domain of topology.
	children int
	zone     string
}

func (w workload) pods() int { return w.groups * w.ranks }

func TestSmallGangs(t *testing.T) {
	if sized(t, false) {
		compare(t, workload{name: fmt.Sprintf("(a) 50 gangs × 8 one-GPU DRA ranks (claim template), %d nodes × 8 GPUs", nodes), groups: 50, ranks: 8})
	}
}

func TestSmallGangsExtendedResource(t *testing.T) {
	if sized(t, false) {
		compare(t, workload{name: fmt.Sprintf("(b) 50 gangs × 8 ranks asking example.com/gpu: 1 (DRA-backed extended resource), %d nodes × 8 GPUs", nodes), groups: 50, ranks: 8, extended: true})
	}
}

func TestLargeGang(t *testing.T) {
	if sized(t, true) {
		compare(t, workload{name: fmt.Sprintf("(c) one 1,024-rank DRA gang, %d nodes × 8 GPUs", nodes), groups: 1, ranks: 1024})
	}
}

func TestLonePods(t *testing.T) {
	if sized(t, true) {
		compare(t, workload{name: fmt.Sprintf("(d) 1,000 lone one-GPU DRA pods, %d nodes × 8 GPUs", nodes), groups: 1000, ranks: 1, lone: true})
	}
}

// TestExistingPods is the schedulers' own rate: 400 pods in 50 gangs exist
// (claims generated) before the scheduler starts, and the clock runs from
// its start (caches synced) to every pod bound — compared with the write
// ceiling.
func TestExistingPods(t *testing.T) {
	if sized(t, false) {
		w := workload{name: fmt.Sprintf("(a) with its 400 pods created before the scheduler starts, %d nodes × 8 GPUs", nodes), groups: 50, ranks: 8, existing: true}
		w.ceiling = writeCeiling(t, w.pods())
		compare(t, w)
	}
}

// sized reports whether the scenario belongs to this run's cluster size
// (large: 1,000 nodes or more); `make bench` runs both sizes.
func sized(t *testing.T, large bool) bool {
	t.Helper()
	if (nodes >= 1000) != large {
		t.Logf("not at %d nodes: this scenario runs in the other size's run of `make bench`", nodes)
		return false
	}
	return true
}

// result is one wave's figures.
type result struct {
	// all: first pod created → every pod bound; afterLast: last pod
	// created → every pod bound; first: first pod created → first group
	// (of trees: first tree) wholly bound (with existing pods: from the
	// scheduler's start, caches synced); claims: last pod created → every
	// pod's claim generated by kube-controller-manager (seen in the pods'
	// status; claim templates only); rss: the scheduler's peak resident
	// memory.
	all, afterLast, first, claims time.Duration
	rss                           int64
	// trees: where the wave's trees were bound (tree workloads only).
	trees *treeResult
}

type variant struct {
	name string
	// kube: kube-scheduler's in-tree gang; else a lockstep binary.
	kube   bool
	binary string
}

func variants(h *harness.Harness) []variant {
	vs := []variant{{name: "kube-scheduler", kube: true}, {name: "lockstep", binary: h.BinDir + "/lockstep"}}
	if b := os.Getenv("LOCKSTEP_BENCH_BASELINE"); b != "" {
		vs = append(vs, variant{name: "lockstep-base", binary: b})
	}
	return vs
}

func compare(t *testing.T, w workload) {
	if w.groups == 0 {
		return
	}
	h := harness.Get(t)
	ctx := harness.Context(t, 5*time.Minute)
	if w.extended {
		h.CreateDeviceClass(ctx, t, builders.ExtendedResourceClass("gpu-extended", "gpu.example.com", string(extendedGPU)))
	}
	vs := variants(h)
	results := map[string][]result{}
	for round := 0; round < rounds; round++ {
		for _, v := range vs {
			r := runWave(t, h, v, fmt.Sprintf("%s-%d", v.name, round), w)
			t.Logf("round %d, %s: all bound %s, after the last pod %s, first group %s, claims generated %s after the last pod, peak RSS %d MiB", round, v.name, r.all, r.afterLast, r.first, r.claims, r.rss>>20)
			results[v.name] = append(results[v.name], r)
		}
	}
	if w.children > 0 {
		fmt.Println(treeTable(w, vs, results))
		return
	}
	host, _ := os.Hostname()
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s — median of %d interleaved rounds; %s, %d CPUs, shared with the control plane:\n", w.name, rounds, host, runtime.NumCPU())
	fmt.Fprintf(&b, "  %-15s %10s %15s %12s %14s %8s %9s   %s\n", "scheduler", "all bound", "after last pod", "first group", "claims ready*", "pods/s", "peak RSS", "vs kube-scheduler: after last pod, all bound")
	ref := medians(results["kube-scheduler"])
	for _, v := range vs {
		m := medians(results[v.name])
		ratio := "—"
		if !v.kube && m.afterLast > 0 && m.all > 0 {
			ratio = fmt.Sprintf("%.2f× faster, %.2f× faster", ref.afterLast.Seconds()/m.afterLast.Seconds(), ref.all.Seconds()/m.all.Seconds())
		}
		fmt.Fprintf(&b, "  %-15s %10s %15s %12s %14s %8.0f %5d MiB   %s\n", v.name, m.all.Round(time.Millisecond), m.afterLast.Round(time.Millisecond), m.first.Round(time.Millisecond),
			m.claims.Round(time.Millisecond), float64(w.pods())/m.all.Seconds(), m.rss>>20, ratio)
	}
	fmt.Fprintf(&b, "  * after the last pod: every pod's claim generated from its template by kube-controller-manager (0 when not measured)\n")
	if w.ceiling > 0 {
		fmt.Fprintf(&b, "  write ceiling (a tuned client: no rate limit, protobuf, %d writers; claim status + binding per pod): %.0f pods/s\n", ceilingWriters, w.ceiling)
		for _, v := range vs {
			fmt.Fprintf(&b, "  %-15s %3.0f%% of the ceiling\n", v.name, 100*float64(w.pods())/medians(results[v.name]).all.Seconds()/w.ceiling)
		}
	}
	fmt.Println(b.String())
}

// ceilingWriters are the tuned client's concurrent writers.
const ceilingWriters = 128

// writeCeiling measures how fast this API server accepts the writes that
// bind a DRA pod — its claim's allocation and reservation (status update),
// then its binding — from a client with no rate limit, protobuf and
// ceilingWriters writers, for n pods that no scheduler takes; it returns
// pods/s.
func writeCeiling(t *testing.T, n int) float64 {
	h := harness.Get(t)
	ctx := harness.Context(t, 10*time.Minute)
	ns := h.Namespace(t)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := workload{groups: n, ranks: 1, lone: true}
	createPods(t, ctx, h, variant{name: "nobody"}, ns, w)
	waitClaims(t, ctx, h, ns, n)
	var pods []corev1.Pod
	harness.Eventually(t, ctx, "every pod's claim in its status", func(ctx context.Context) (bool, string, error) {
		list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		pods = list.Items
		with := 0
		for _, p := range pods {
			if len(p.Status.ResourceClaimStatuses) > 0 {
				with++
			}
		}
		return with == n, fmt.Sprintf("%d of %d", with, n), nil
	})
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*resourcev1.ResourceClaim{}
	for i := range claims.Items {
		byName[claims.Items[i].Name] = &claims.Items[i]
	}
	nodeList, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(nodeList.Items))
	for _, nd := range nodeList.Items {
		names = append(names, nd.Name)
	}
	sort.Strings(names)
	cfg := rest.CopyConfig(h.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	client := kubernetes.NewForConfigOrDie(cfg)
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan int)
	for c := 0; c < ceilingWriters; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := &pods[i]
				node, dev := names[i/8%len(names)], fmt.Sprintf("gpu-%d", i%8)
				c := byName[*p.Status.ResourceClaimStatuses[0].ResourceClaimName].DeepCopy()
				c.Status.Allocation = &resourcev1.AllocationResult{
					Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
						Request: c.Spec.Devices.Requests[0].Name, Driver: "gpu.example.com", Pool: node, Device: dev,
					}}},
					NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
						Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
					}}}}},
				}
				c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
				if _, err := client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
					continue
				}
				binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, UID: p.UID}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
				if err := client.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	empty(t, ctx, h, ns)
	t.Logf("write ceiling: %d pods in %s", n, elapsed)
	return float64(n) / elapsed.Seconds()
}

// runWave starts the scheduler, creates the workload in a fresh namespace
// (16 clients in parallel) and times it; the namespace is emptied before
// it returns so the next wave finds every GPU free.
func runWave(t *testing.T, h *harness.Harness, v variant, identity string, w workload) result {
	ctx := harness.Context(t, 15*time.Minute)
	ns := h.Namespace(t)
	if !w.extended {
		if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if w.children > 0 {
		for tr := 0; tr < w.trees(); tr++ {
			createRoot(ctx, t, h, v, ns, tr, w)
		}
	}
	if !w.lone {
		for g := 0; g < w.groups; g++ {
			createGroup(ctx, t, h, v, ns, fmt.Sprintf("g%04d", g), w)
		}
	}
	var sched *harness.SchedulerProcess
	profile, profiled := func() {}, func() {}
	startScheduler := func() {
		if v.kube {
			sched = h.StartKubeScheduler(t, identity)
		} else {
			args := []string{"--leader-elect=false"}
			if dir := os.Getenv("LOCKSTEP_BENCH_PROFILE"); dir != "" {
				var addr string
				addr, profile, profiled = cpuProfile(t, filepath.Join(dir, identity+".pprof"))
				args = append(args, "--metrics-bind-address="+addr, "--profiling")
			}
			sched = h.StartSchedulerBinary(t, v.binary, identity, nil, args...)
		}
		time.Sleep(time.Duration(3+nodes/250) * time.Second) // caches synced before the clock starts
	}
	if !w.existing {
		startScheduler()
	}
	defer func() { _ = sched.Cmd.Process.Kill(); <-sched.Done }()

	start := time.Now()
	if !w.existing {
		profile()
	}
	createPods(t, ctx, h, v, ns, w)
	lastCreated := time.Now()
	if w.existing {
		waitClaims(t, ctx, h, ns, w.pods())
		startScheduler()
		profile()
		start, lastCreated = time.Now(), time.Now()
	}
	var r result
	progress := stallWatch(w)
	harness.Eventually(t, ctx, "every pod bound", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		perUnit := map[string]int{}
		bound, claimed := 0, 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
				perUnit[w.unitOf(groupOf(&p))]++
			}
			if len(p.Status.ResourceClaimStatuses) > 0 {
				claimed++
			}
		}
		if r.claims == 0 && !w.extended && claimed == w.pods() {
			r.claims = time.Since(lastCreated)
		}
		if r.first == 0 {
			for _, n := range perUnit {
				if n == w.unitPods() {
					r.first = time.Since(start)
					break
				}
			}
		}
		if progress(bound) {
			return true, "", nil
		}
		return bound == w.pods(), fmt.Sprintf("%d of %d bound", bound, w.pods()), nil
	})
	r.all, r.afterLast = time.Since(start), time.Since(lastCreated)
	r.rss = peakRSS(t, sched.Cmd.Process.Pid)
	profiled()
	if w.children > 0 {
		r.trees = checkTrees(t, ctx, h, v, ns, w) // the scheduler still running: its roots' conditions settle
	}
	_ = sched.Cmd.Process.Kill()
	if w.children == 0 && w.topology != "" {
		checkOneDomain(t, ctx, h, v, ns, w)
	}
	empty(t, ctx, h, ns)
	return r
}

// createPods creates the workload's pods with 16 clients in parallel.
func createPods(t *testing.T, ctx context.Context, h *harness.Harness, v variant, ns string, w workload) {
	var wg sync.WaitGroup
	work := make(chan int)
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod(v, ns, w, i), metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := 0; i < w.pods(); i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}

// waitClaims waits until n claims exist in ns (generated from templates).
func waitClaims(t *testing.T, ctx context.Context, h *harness.Harness, ns string, n int) {
	t.Helper()
	harness.Eventually(t, ctx, "every pod's claim generated", func(ctx context.Context) (bool, string, error) {
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		return len(claims.Items) >= n, fmt.Sprintf("%d of %d", len(claims.Items), n), nil
	})
}

// cpuProfile picks a local address for a scheduler's metrics server and
// returns a function that starts recording a CPU profile of it for 10 s
// into file, and one that waits for the recording to end
// (LOCKSTEP_BENCH_PROFILE=<dir>: where a Lockstep wave's time goes).
func cpuProfile(t *testing.T, file string) (string, func(), func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan struct{})
	return addr, func() {
		go func() {
			defer close(done)
			resp, err := http.Get("http://" + addr + "/debug/pprof/profile?seconds=10")
			if err != nil {
				t.Logf("profile: %v", err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Logf("profile: %v", err)
			}
			t.Logf("CPU profile of the wave in %s", file)
		}()
	}, func() { <-done }
}

func groupOf(p *corev1.Pod) string {
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return *sg.PodGroupName
	}
	if g := p.Labels[lockv1.PodGroupLabel]; g != "" {
		return g
	}
	return p.Name
}

// createGroup creates the group the variant's scheduler reads: an in-tree
// scheduling.k8s.io/v1beta1 PodGroup for kube-scheduler, a Lockstep
// PodGroup for Lockstep — both a gang of minCount ranks, required in one
// domain of w.topology when set (the same field in both APIs), a child of
// its tree's root when w.children is set (the same field; the in-tree one
// also names its template in the tree's Workload).
func createGroup(ctx context.Context, t *testing.T, h *harness.Harness, v variant, ns, name string, w workload) {
	t.Helper()
	root, template := w.parentOf(name)
	if !v.kube {
		pg := builders.GangPodGroup(ns, name, int32(w.ranks))
		if w.topology != "" {
			pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: w.topology}}}
		}
		if root != "" {
			pg.Spec.ParentCompositePodGroupName = ptr.To(root)
		}
		h.CreatePodGroup(ctx, t, pg)
		return
	}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(w.ranks)},
		}},
	}
	if w.topology != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: w.topology}}}
	}
	if root != "" {
		pg.Spec.ParentCompositePodGroupName = ptr.To(root)
		pg.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: root, TemplateName: template}
	}
	got, err := h.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if root != "" && got.Spec.ParentCompositePodGroupName == nil {
		t.Fatalf("the API server dropped PodGroup %s's spec.parentCompositePodGroupName: CompositePodGroup is off", name)
	}
	if w.topology != "" && got.Spec.SchedulingConstraints == nil {
		t.Fatalf("the API server dropped PodGroup %s's spec.schedulingConstraints: TopologyAwareWorkloadScheduling is off", name)
	}
}

// pod is rank i of the workload, as the variant's scheduler takes it.
func pod(v variant, ns string, w workload, i int) *corev1.Pod {
	g := i / w.ranks
	group := fmt.Sprintf("g%04d", g)
	b := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i%w.ranks)).Req(corev1.ResourceCPU, "1")
	if w.extended {
		b = b.Req(extendedGPU, "1")
	} else {
		b = b.ClaimTemplate("gpu", "one-gpu")
	}
	switch {
	case v.kube && !w.lone:
		p := b.Obj()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		return p
	case v.kube:
		return b.Obj()
	case v.name == "nobody":
		return b.Scheduler("nobody").Obj()
	case w.lone:
		return b.Scheduler(lockv1.SchedulerName).Obj()
	}
	return b.Member(group).Obj()
}

// empty deletes the wave's pods and waits until they and their claims are
// gone.
func empty(t *testing.T, ctx context.Context, h *harness.Harness, ns string) {
	t.Helper()
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
}

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Logf("peak RSS of %d: %v", pid, err)
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func medians(rs []result) result {
	if len(rs) == 0 {
		return result{}
	}
	pick := func(f func(result) int64) int64 {
		xs := make([]int64, 0, len(rs))
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
		return xs[len(xs)/2]
	}
	return result{
		all:       time.Duration(pick(func(r result) int64 { return int64(r.all) })),
		afterLast: time.Duration(pick(func(r result) int64 { return int64(r.afterLast) })),
		first:     time.Duration(pick(func(r result) int64 { return int64(r.first) })),
		claims:    time.Duration(pick(func(r result) int64 { return int64(r.claims) })),
		rss:       pick(func(r result) int64 { return r.rss }),
	}
}
