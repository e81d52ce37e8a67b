package devcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// supervisedState is what these tests read of state.json.
type supervisedState struct {
	Processes []struct {
		Name     string `json:"name"`
		PID      int    `json:"pid"`
		Restarts int    `json:"restarts"`
	} `json:"processes"`
	Supervisor *struct {
		PID int `json:"pid"`
	} `json:"supervisor"`
}

func readSupervised(t *testing.T, dir string) supervisedState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st supervisedState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// component is the pid and restart count state.json records for a component.
func (st supervisedState) component(name string) (pid, restarts int) {
	for _, p := range st.Processes {
		if p.Name == name {
			return p.PID, p.Restarts
		}
	}
	return 0, 0
}

// eventually polls cond every 200 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		var ok bool
		if ok, last = cond(); ok {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last: %s)", timeout, what, last)
	return 0
}

// gangYAML is a namespace-scoped gang of two pods without devices; with
// selector set, its pods need a node labelled lockstep.dev/test=<selector>.
func gangYAML(ns, name, selector string) string {
	sel := ""
	if selector != "" {
		sel = "\n  nodeSelector: {lockstep.dev/test: " + selector + "}"
	}
	y := fmt.Sprintf(`apiVersion: scheduling.lockstep.dev/v1beta1
kind: PodGroup
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  schedulingPolicy:
    gang: {minCount: 2}
`, ns, name)
	for i := 0; i < 2; i++ {
		y += fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata:
  name: %[2]s-%[3]d
  namespace: %[1]s
  labels: {scheduling.lockstep.dev/pod-group: %[2]s}
spec:
  schedulerName: lockstep%[4]s
  containers:
  - name: main
    image: busybox
    resources: {requests: {cpu: 100m}}
`, ns, name, i, sel)
	}
	return y
}

// applyGang creates a gang with kubectl, as a user would.
func (c *cli) applyGang(t *testing.T, kubeconfig, ns, name, selector string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(f, []byte(gangYAML(ns, name, selector)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "apply", "-f", f); code != 0 {
		t.Fatalf("kubectl apply: exit %d:\n%s", code, out)
	}
}

// boundTo waits until both pods of a gang are bound and returns their nodes.
func boundTo(t *testing.T, client kubernetes.Interface, ns, name string, timeout time.Duration) (nodes []string, took time.Duration) {
	t.Helper()
	took = eventually(t, timeout, "gang "+name+" bound", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "scheduling.lockstep.dev/pod-group=" + name})
		if err != nil {
			return false, err.Error()
		}
		nodes = nodes[:0]
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
		return len(nodes) == 2, fmt.Sprintf("%d of %d pods bound", len(nodes), len(pods.Items))
	})
	return nodes, took
}

// TestUpRestartsComponentsThatExit: `dev up` supervises its components as a
// kubelet would. The scheduler killed is started again and schedules; an
// API outage longer than the scheduler's and controllers' lease renew
// deadline (the API server frozen 15 s) makes them exit, and they are
// started again and schedule, a node label set afterwards reaching
// placement; their logs are kept across restarts; `dev down` stops the
// supervisor first, then every component, restarted ones included.
func TestUpRestartsComponentsThatExit(t *testing.T) {
	c := newCLI(t)
	dir := stateDir(t, c)
	base := freeBase(t)
	t.Cleanup(func() { c.run(t, 3*time.Minute, "lockstep", "dev", "down", "--state-dir", dir) })
	out, code := c.run(t, 4*time.Minute, "lockstep", "dev", "up", "--detach", "--state-dir", dir, "--base-port", strconv.Itoa(base))
	if code != 0 {
		t.Fatalf("dev up: exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "components that exit are started again") {
		t.Errorf("dev up --detach: want it to say it supervises, got:\n%s", out)
	}
	st := readSupervised(t, dir)
	if st.Supervisor == nil || !running(st.Supervisor.PID) {
		t.Fatalf("state.json: want a running supervisor recorded, got %+v", st.Supervisor)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out, code := c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "create", "namespace", "supervised"); code != 0 {
		t.Fatalf("kubectl create namespace: %s", out)
	}

	// The scheduler killed.
	sched, _ := st.component("lockstep-scheduler")
	if err := syscall.Kill(sched, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the scheduler started again", func() (bool, string) {
		pid, restarts := readSupervised(t, dir).component("lockstep-scheduler")
		return pid != sched && restarts >= 1 && running(pid), fmt.Sprintf("pid %d, restarts %d", pid, restarts)
	})
	c.applyGang(t, kubeconfig, "supervised", "after-kill", "")
	_, took := boundTo(t, client, "supervised", "after-kill", 3*time.Minute)
	t.Logf("scheduler killed and started again; a gang bound %s after it was created", took.Round(100*time.Millisecond))

	// An API outage past the lease renew deadline (10 s).
	st = readSupervised(t, dir)
	api, _ := st.component("kube-apiserver")
	_, schedRestarts := st.component("lockstep-scheduler")
	_, ctlRestarts := st.component("lockstep-controllers")
	if err := syscall.Kill(api, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(api, syscall.SIGCONT) })
	time.Sleep(15 * time.Second)
	if err := syscall.Kill(api, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	eventually(t, 3*time.Minute, "the scheduler and controllers, which lost their leases, started again", func() (bool, string) {
		st := readSupervised(t, dir)
		pid, s := st.component("lockstep-scheduler")
		cpid, c := st.component("lockstep-controllers")
		return s > schedRestarts && c > ctlRestarts && running(pid) && running(cpid),
			fmt.Sprintf("scheduler restarts %d (was %d), controllers restarts %d (was %d)", s, schedRestarts, c, ctlRestarts)
	})
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target := nodes.Items[len(nodes.Items)-1].Name
	if out, code := c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "label", "node", target, "lockstep.dev/test=after-outage"); code != 0 {
		t.Fatalf("kubectl label node: %s", out)
	}
	labelled := time.Now()
	c.applyGang(t, kubeconfig, "supervised", "after-outage", "after-outage")
	placed, _ := boundTo(t, client, "supervised", "after-outage", 3*time.Minute)
	for _, n := range placed {
		if n != target {
			t.Errorf("gang after-outage bound to %s, want the node labelled %s", n, target)
		}
	}
	t.Logf("API server frozen 15 s: scheduler and controllers exited and were started again; a node label set %s after the API came back reached placement %s later",
		labelled.Sub(resumed).Round(100*time.Millisecond), time.Since(labelled).Round(100*time.Millisecond))

	// Logs kept across restarts.
	log, err := os.ReadFile(filepath.Join(dir, "logs", "lockstep-scheduler.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "--- lockstep dev: lockstep-scheduler stopped"); n < 2 {
		t.Errorf("lockstep-scheduler.log: want the runs before each of its 2 restarts kept, with a line per restart; got %d such lines", n)
	}

	// dev down stops everything, restarted components included.
	final := readSupervised(t, dir)
	out, code = c.run(t, 3*time.Minute, "lockstep", "dev", "down", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("dev down: exit %d:\n%s", code, out)
	}
	if running(final.Supervisor.PID) {
		t.Errorf("supervisor (pid %d) still running after dev down", final.Supervisor.PID)
	}
	for _, p := range final.Processes {
		if running(p.PID) {
			t.Errorf("%s (pid %d) still running after dev down", p.Name, p.PID)
		}
	}
	if !portsFree(base, 12) {
		t.Errorf("ports %d-%d still taken after dev down", base, base+11)
	}
}

// TestForegroundUpSupervisesUntilDown: a foreground `dev up` is the
// supervisor itself — it says so, starts a killed component again and
// reports it — and `dev down` from another shell stops it, which stops the
// cluster.
func TestForegroundUpSupervisesUntilDown(t *testing.T) {
	c := newCLI(t)
	dir := stateDir(t, c)
	base := freeBase(t)
	up := exec.Command(filepath.Join(c.bin, "lockstep"), "dev", "up", "--state-dir", dir, "--base-port", strconv.Itoa(base))
	up.Dir = c.root
	out := &syncBuffer{}
	up.Stdout, up.Stderr = out, out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	t.Cleanup(func() {
		_ = up.Process.Kill()
		c.run(t, 3*time.Minute, "lockstep", "dev", "down", "--state-dir", dir)
	})
	eventually(t, 4*time.Minute, "dev up running in the foreground", func() (bool, string) {
		return strings.Contains(out.String(), "starting again any component that exits"), out.String()
	})
	st := readSupervised(t, dir)
	if st.Supervisor == nil || st.Supervisor.PID != up.Process.Pid {
		t.Fatalf("state.json: want dev up (pid %d) recorded as the supervisor, got %+v", up.Process.Pid, st.Supervisor)
	}
	ctl, _ := st.component("lockstep-controllers")
	if err := syscall.Kill(ctl, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "dev up reporting the controllers started again", func() (bool, string) {
		pid, restarts := readSupervised(t, dir).component("lockstep-controllers")
		return strings.Contains(out.String(), "lockstep-controllers started again") && pid != ctl && restarts == 1 && running(pid),
			fmt.Sprintf("pid %d, restarts %d", pid, restarts)
	})
	final := readSupervised(t, dir)
	if o, code := c.run(t, 3*time.Minute, "lockstep", "dev", "down", "--state-dir", dir); code != 0 {
		t.Fatalf("dev down: exit %d:\n%s", code, o)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("dev up: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("dev up still running after dev down:\n%s", out.String())
	}
	for _, p := range final.Processes {
		if running(p.PID) {
			t.Errorf("%s (pid %d) still running after dev down", p.Name, p.PID)
		}
	}
	if !portsFree(base, 12) {
		t.Errorf("ports %d-%d still taken after dev down", base, base+11)
	}
}

// syncBuffer is an io.Writer safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
