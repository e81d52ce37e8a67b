package harness

import (
	"context"
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
