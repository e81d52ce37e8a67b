// Package devcli drives `bin/lockstep dev up|down` as a user would and checks
// what it leaves behind: a working cluster, clean refusals, and after `down`
// no process and no port; then the user commands (get, explain, and the
// kubectl plugin) on that cluster, reached through $KUBECONFIG as kubectl
// reaches it.
package devcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

type cli struct {
	root string
	bin  string
}

func newCLI(t *testing.T) *cli {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &cli{root: root, bin: filepath.Join(root, "bin")}
	if _, err := os.Stat(filepath.Join(c.bin, "lockstep")); err != nil {
		t.Fatalf("bin/lockstep missing (run `make build`): %v", err)
	}
	return c
}

// run runs a binary from bin/ and returns its combined output and exit code.
func (c *cli) run(t *testing.T, timeout time.Duration, name string, args ...string) (string, int) {
	t.Helper()
	return c.runWith(t, timeout, invocation{}, name, args...)
}

// invocation is what a command runs with beside its arguments.
type invocation struct {
	// env is added to the test's environment (a later entry wins).
	env []string
	// stdin is the command's input.
	stdin string
	// stdoutOnly leaves stderr out of the output returned.
	stdoutOnly bool
}

// runWith runs a binary from bin/ with env and stdin and returns its output
// and exit code.
func (c *cli) runWith(t *testing.T, timeout time.Duration, in invocation, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), in.env...)
	cmd.Stdin = strings.NewReader(in.stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if in.stdoutOnly {
		cmd.Stderr = &errOut
	}
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s %v: %v", name, args, err)
	}
	if in.stdoutOnly && code != 0 {
		t.Logf("%s %v: stderr:\n%s", name, args, errOut.String())
	}
	return out.String(), code
}

func stateDir(t *testing.T, c *cli) string {
	if err := os.MkdirAll(filepath.Join(c.root, ".lockstep", "e2e"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(filepath.Join(c.root, ".lockstep", "e2e"), "devcli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// freeBase finds devcluster.PortCount consecutive free loopback ports.
func freeBase(t *testing.T) int {
	// Below the ephemeral port range (32768+), where client connections
	// would otherwise take ports between the check and the bind.
	n := devcluster.PortCount
	for base := 20000 + os.Getpid()%(12000/n)*n; base < 32000; base += n {
		if portsFree(base, n) {
			return base
		}
	}
	t.Fatal("no free ports")
	return 0
}

func portsFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		_ = ln.Close()
	}
	return true
}

// running reports whether pid is a live process. A zombie (exited, not yet
// reaped by whatever adopted it after the detached `dev up` exited) is not.
func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || len(stat) < i+3 || stat[i+2] != 'Z'
}

type recordedState struct {
	Processes []struct {
		Name string `json:"name"`
		PID  int    `json:"pid"`
	} `json:"processes"`
}

func TestUpDownLifecycle(t *testing.T) {
	c := newCLI(t)
	dir := stateDir(t, c)
	base := freeBase(t)
	up := []string{"dev", "up", "--detach", "--state-dir", dir, "--base-port", strconv.Itoa(base)}
	t.Cleanup(func() { c.run(t, time.Minute, "lockstep", "dev", "down", "--state-dir", dir) })

	out, code := c.run(t, 4*time.Minute, "lockstep", up...)
	if code != 0 {
		t.Fatalf("dev up: exit %d:\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st recordedState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Processes) != 7 {
		t.Fatalf("want 7 components recorded (etcd, kube-apiserver, kube-controller-manager, kwok, lockstep webhook, controllers, scheduler), got %+v", st.Processes)
	}

	kubeconfig := filepath.Join(dir, "kubeconfig")
	out, code = c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	if code != 0 {
		t.Fatalf("kubectl get nodes: exit %d:\n%s", code, out)
	}
	if got := strings.Count(out, "=True"); got != 3 {
		t.Errorf("kubectl get nodes: want 3 Ready nodes, got:\n%s", out)
	}
	out, code = c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "get", "resourceslices", "-o",
		`jsonpath={range .items[*]}{range .spec.devices[*]}{.name}{"\n"}{end}{end}`)
	if code != 0 || strings.Count(out, "gpu-") != 6 {
		t.Errorf("kubectl get resourceslices: want 6 devices, got exit %d:\n%s", code, out)
	}

	// A second `up` on the same state directory is refused and changes nothing.
	out, code = c.run(t, time.Minute, "lockstep", up...)
	if code == 0 || !strings.Contains(out, "already running") || !strings.Contains(out, "lockstep dev down") {
		t.Errorf("second dev up: want a refusal naming `lockstep dev down`, got exit %d:\n%s", code, out)
	}
	// Another state directory on the same ports is refused before starting anything.
	other := stateDir(t, c)
	out, code = c.run(t, time.Minute, "lockstep", "dev", "up", "--detach", "--state-dir", other, "--base-port", strconv.Itoa(base))
	if code == 0 || !strings.Contains(out, "port in use") || !strings.Contains(out, fmt.Sprintf("127.0.0.1:%d", base)) {
		t.Errorf("dev up on taken ports: want a refusal naming the port, got exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(other, "state.json")); err == nil {
		t.Error("refused dev up left a state.json behind")
	}
	// The first cluster is untouched by the refusals.
	out, code = c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "get", "--raw", "/readyz")
	if code != 0 {
		t.Errorf("cluster unhealthy after refused ups: %s", out)
	}

	out, code = c.run(t, 2*time.Minute, "lockstep", "dev", "down", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("dev down: exit %d:\n%s", code, out)
	}
	for _, p := range st.Processes {
		if running(p.PID) {
			t.Errorf("%s (pid %d) still running after dev down", p.Name, p.PID)
		}
	}
	if !portsFree(base, 9) {
		t.Errorf("ports %d-%d still taken after dev down", base, base+8)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "logs" {
			t.Errorf("dev down left %s behind in the state directory", e.Name())
		}
	}
	// down again is a clean no-op.
	if out, code = c.run(t, time.Minute, "lockstep", "dev", "down", "--state-dir", dir); code != 0 || !strings.Contains(out, "nothing to stop") {
		t.Errorf("second dev down: want exit 0 and 'nothing to stop', got %d:\n%s", code, out)
	}
}

func TestUpReportsFailingComponentWithItsLog(t *testing.T) {
	c := newCLI(t)
	dir := stateDir(t, c)
	// A bin directory where kube-controller-manager crashes at start.
	fakeBin := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver", "kwok"} {
		if err := os.Symlink(filepath.Join(c.bin, name), filepath.Join(fakeBin, name)); err != nil {
			t.Fatal(err)
		}
	}
	crash := "#!/bin/sh\necho 'E1129 simulated crash: cannot load controller config' >&2\nexit 255\n"
	if err := os.WriteFile(filepath.Join(fakeBin, "kube-controller-manager"), []byte(crash), 0o755); err != nil {
		t.Fatal(err)
	}
	base := freeBase(t)
	t.Cleanup(func() { c.run(t, time.Minute, "lockstep", "dev", "down", "--state-dir", dir) })
	out, code := c.run(t, 4*time.Minute, "lockstep", "dev", "up", "--detach", "--state-dir", dir,
		"--base-port", strconv.Itoa(base), "--bin-dir", fakeBin, "--timeout", "90s")
	if code == 0 {
		t.Fatalf("dev up with a crashing controller-manager succeeded:\n%s", out)
	}
	for _, want := range []string{"kube-controller-manager failed", "simulated crash: cannot load controller config"} {
		if !strings.Contains(out, want) {
			t.Errorf("dev up output: want %q, got:\n%s", want, out)
		}
	}
	if !portsFree(base, 9) {
		t.Errorf("failed dev up left ports %d-%d taken (etcd or kube-apiserver still running)", base, base+8)
	}
}

func TestUpRejectsInvalidClusterSpec(t *testing.T) {
	c := newCLI(t)
	dir := stateDir(t, c)
	spec := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "nodePools:\n- name: gpu\n  count: 2\n  capacity: {cpu: '8', memory: 32Gi, pods: '110'}\n  devices:\n  - driver: gpu.example.com\n    count: 2\n    attributes: {index: {int: '{{.Idx}}'}}\n"
	if err := os.WriteFile(spec, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := c.run(t, time.Minute, "lockstep", "dev", "up", "--detach", "--state-dir", dir, "--cluster", spec, "--base-port", strconv.Itoa(freeBase(t)))
	if code == 0 {
		t.Fatalf("dev up accepted an invalid spec:\n%s", out)
	}
	if !strings.Contains(out, "nodePools[0].devices[0].attributes[index].int") {
		t.Errorf("want the error to name the field nodePools[0].devices[0].attributes[index].int, got:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err == nil {
		t.Error("invalid spec: a cluster was started anyway")
	}
}

// TestUpWithIntegrationsRunsTheJobSetExample: `dev up --integrations jobset`
// runs the JobSet controller as a component of the cluster, so the example
// of docs/integrations.md (examples/integrations/jobset.yaml) runs as a
// gang, and `dev down` stops the controller with the rest.
func TestUpWithIntegrationsRunsTheJobSetExample(t *testing.T) {
	c := newCLI(t)
	dir := stateDir(t, c)
	base := freeBase(t)
	t.Cleanup(func() { c.run(t, time.Minute, "lockstep", "dev", "down", "--state-dir", dir) })
	out, code := c.run(t, 5*time.Minute, "lockstep", "dev", "up", "--detach", "--state-dir", dir, "--base-port", strconv.Itoa(base), "--integrations", "jobset")
	if code != 0 {
		t.Fatalf("dev up --integrations jobset: exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "starting the jobset controller") {
		t.Errorf("dev up does not say it starts the JobSet controller:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st recordedState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	controller := 0
	for _, p := range st.Processes {
		if p.Name == "jobset-controller" {
			controller = p.PID
		}
	}
	if controller == 0 || !running(controller) {
		t.Fatalf("want the JobSet controller recorded and running, got %+v", st.Processes)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	example := filepath.Join(c.root, "examples", "integrations", "jobset.yaml")
	if out, code := c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "apply", "-f", example); code != 0 {
		t.Fatalf("kubectl apply %s: exit %d:\n%s", example, code, out)
	}
	eventually(t, 2*time.Minute, "the JobSet's 5 pods bound as one gang", func() (bool, string) {
		out, _ := c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "get", "pods", "-n", "ml-team", "-l", "scheduling.lockstep.dev/pod-group=llama-pretrain",
			"-o", `jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}`)
		bound := 0
		for _, n := range strings.Fields(out) {
			if n != "" {
				bound++
			}
		}
		return bound == 5, out
	})
	if out, code = c.run(t, 2*time.Minute, "lockstep", "dev", "down", "--state-dir", dir); code != 0 {
		t.Fatalf("dev down: exit %d:\n%s", code, out)
	}
	if running(controller) {
		t.Errorf("the JobSet controller (pid %d) still runs after dev down", controller)
	}
}
