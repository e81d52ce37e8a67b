package harness

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// CreatePodGroup creates a Lockstep PodGroup or fails the test.
func (h *Harness) CreatePodGroup(ctx context.Context, t testing.TB, pg *lockv1.PodGroup) {
	t.Helper()
	if err := h.CreatePodGroupErr(ctx, pg); err != nil {
		t.Fatalf("creating PodGroup %s: %v", pg.Name, err)
	}
}

// CreatePodGroupErr creates a Lockstep PodGroup and returns the API error.
func (h *Harness) CreatePodGroupErr(ctx context.Context, pg *lockv1.PodGroup) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pg)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(lockv1.GroupVersion.WithKind("PodGroup"))
	_, err = h.Dynamic.Resource(podgroup.Resource).Namespace(pg.Namespace).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// PodGroup reads a Lockstep PodGroup.
func (h *Harness) PodGroup(ctx context.Context, ns, name string) (*lockv1.PodGroup, error) {
	u, err := h.Dynamic.Resource(podgroup.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pg := &lockv1.PodGroup{}
	return pg, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pg)
}

// ScheduledCondition returns the group's PodGroupInitiallyScheduled condition (or nil).
func (h *Harness) ScheduledCondition(ctx context.Context, ns, name string) (*metav1.Condition, error) {
	pg, err := h.PodGroup(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(pg.Status.Conditions, lockv1.PodGroupInitiallyScheduled), nil
}

// GroupPods lists the pods of a group and counts the bound ones.
func (h *Harness) GroupPods(ctx context.Context, ns, group string) (pods []corev1.Pod, bound int, err error) {
	list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=" + group})
	if err != nil {
		return nil, 0, err
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return list.Items, bound, nil
}

// StartScheduler runs a `lockstep scheduler` replica against the package's
// cluster, with extra environment (test hooks) and arguments. It is killed
// when the test ends; its log is in the cluster's log directory.
func (h *Harness) StartScheduler(t testing.TB, identity string, env []string, extraArgs ...string) *SchedulerProcess {
	t.Helper()
	return h.StartSchedulerBinary(t, filepath.Join(h.BinDir, "lockstep"), identity, env, extraArgs...)
}

// StartSchedulerBinary is StartScheduler with another lockstep binary (a
// benchmark's baseline build).
func (h *Harness) StartSchedulerBinary(t testing.TB, binary, identity string, env []string, extraArgs ...string) *SchedulerProcess {
	t.Helper()
	if h.Cluster == nil {
		t.Fatal("StartScheduler needs a cluster the harness started")
	}
	return h.startProcess(t, binary, identity, env, append(h.Cluster.LockstepSchedulerArgs(identity), extraArgs...))
}

// StartControllers runs a `lockstep controllers` replica against the
// package's cluster (for a package whose cluster runs none), with extra
// environment (test hooks) and arguments. It is killed when the test ends;
// its log is in the cluster's log directory as <identity>.log.
func (h *Harness) StartControllers(t testing.TB, identity string, env []string, extraArgs ...string) *SchedulerProcess {
	t.Helper()
	if h.Cluster == nil {
		t.Fatal("StartControllers needs a cluster the harness started")
	}
	return h.startProcess(t, filepath.Join(h.BinDir, "lockstep"), identity, env, append(h.Cluster.LockstepControllersArgs(), extraArgs...))
}

// StartKubeScheduler starts bin/kube-scheduler (v1.37, the cluster's
// profile gates: on the upstream profile its in-tree gang scheduling) with
// extra arguments; it is killed when the test ends.
func (h *Harness) StartKubeScheduler(t testing.TB, identity string, extraArgs ...string) *SchedulerProcess {
	t.Helper()
	if h.Cluster == nil {
		t.Fatal("StartKubeScheduler needs a cluster the harness started")
	}
	return h.startProcess(t, filepath.Join(h.BinDir, "kube-scheduler"), identity, nil, h.Cluster.KubeSchedulerArgs(extraArgs...))
}

func (h *Harness) startProcess(t testing.TB, binary, identity string, env, args []string) *SchedulerProcess {
	t.Helper()
	logPath := filepath.Join(h.Cluster.Dir(), "logs", identity+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	sp := &SchedulerProcess{Cmd: cmd, Done: done}
	go func() { _ = cmd.Wait(); sp.ExitCode = cmd.ProcessState.ExitCode(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- %s log ---\n%s", identity, tail(string(b), 40))
		}
	})
	t.Logf("started %s as %s (pid %d, log %s)", filepath.Base(binary), identity, cmd.Process.Pid, logPath)
	return sp
}

// SchedulerProcess is a scheduler replica started by a test.
type SchedulerProcess struct {
	Cmd *exec.Cmd
	// Done is closed when the process has exited; ExitCode is valid then.
	Done     chan struct{}
	ExitCode int
}

func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			lines++
			if lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}

// Explain runs `lockstep explain TYPE NAME -o json` as a user would.
func (h *Harness) Explain(t testing.TB, ns, kind, name string) *explain.Report {
	t.Helper()
	out, err := exec.Command(filepath.Join(h.BinDir, "lockstep"), "explain", kind, name, "-n", ns, "--kubeconfig", h.Kubeconfig, "-o", "json").Output()
	if err != nil {
		t.Fatalf("lockstep explain %s %s: %v", kind, name, err)
	}
	var r explain.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("decoding explain -o json: %v\n%s", err, out)
	}
	return &r
}
