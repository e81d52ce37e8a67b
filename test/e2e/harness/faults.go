package harness

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// KillComponent kills a component of the package's cluster (SIGKILL), as
// a crash would; it stays down until StartComponent.
func (h *Harness) KillComponent(t testing.TB, name string) {
	t.Helper()
	if h.Cluster == nil {
		t.Fatal("KillComponent needs a cluster the harness started")
	}
	if err := h.Cluster.Kill(name); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s", name)
}

// PauseComponent stops a component of the package's cluster (SIGSTOP): it
// keeps its connections and answers nothing, as a hung process does, and
// plays nothing it had queued. The returned resume continues it (SIGCONT);
// it acts once, and runs at the test's cleanup if the test has not called it.
func (h *Harness) PauseComponent(t testing.TB, name string) (resume func()) {
	t.Helper()
	if h.Cluster == nil {
		t.Fatal("PauseComponent needs a cluster the harness started")
	}
	pid := h.Cluster.PID(name)
	if pid == 0 {
		t.Fatalf("%s does not run", name)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("pausing %s: %v", name, err)
	}
	t.Logf("paused %s (pid %d)", name, pid)
	resumed := false
	resume = func() {
		if resumed {
			return
		}
		resumed = true
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Errorf("resuming %s: %v", name, err)
		}
	}
	t.Cleanup(resume)
	return resume
}

// StartComponent starts a killed component again; for kube-apiserver it
// returns once the API server is ready.
func (h *Harness) StartComponent(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	if err := h.Cluster.Start(name); err != nil {
		t.Fatal(err)
	}
	if name == "kube-apiserver" {
		Eventually(t, ctx, "the API server ready again", func(ctx context.Context) (bool, string, error) {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			body, err := h.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
			if err != nil {
				return false, err.Error(), nil
			}
			return string(body) == "ok", string(body), nil
		})
	}
	t.Logf("started %s again (pid %d)", name, h.Cluster.PID(name))
}
