package devcluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitServingWaitsForTheWebhookHandlers: a controller-runtime manager
// serves its webhook port (and reports ready) before it registers its
// webhooks' handlers. waitServing returns only once every registered path
// has a handler, so the first create after `dev up` does not fail with
// "the server could not find the requested resource".
func TestWaitServingWaitsForTheWebhookHandlers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []string
	}{
		{name: "one webhook", paths: []string{"/mutate-jobset-x-k8s-io-v1alpha2-jobset"}},
		{name: "two webhooks, registered one after the other", paths: []string{"/mutate-a", "/validate-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			t.Cleanup(health.Close)

			var mu sync.Mutex
			registered := map[string]bool{}
			var probes atomic.Int32
			webhook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				probes.Add(1)
				mu.Lock()
				ok := registered[r.URL.Path]
				mu.Unlock()
				if !ok {
					http.NotFound(w, r)
					return
				}
				// controller-runtime's answer to a body that is not JSON.
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"response":{"allowed":false,"status":{"code":400}}}`))
			}))
			t.Cleanup(webhook.Close)

			ports := ControllerPorts{Health: port(t, health.URL), Webhook: port(t, webhook.URL), webhookPaths: tc.paths}
			done := make(chan error, 1)
			go func() {
				done <- waitServing(context.Background(), Controller{Name: "test"}, ports, make(chan struct{}), "/dev/null")
			}()
			for i, path := range tc.paths {
				for probes.Load() < int32(2*(i+1)) {
					select {
					case err := <-done:
						t.Fatalf("waitServing returned (%v) while %s had no handler", err, path)
					case <-time.After(10 * time.Millisecond):
					}
				}
				select {
				case err := <-done:
					t.Fatalf("waitServing returned (%v) while %s had no handler", err, path)
				default:
				}
				mu.Lock()
				registered[path] = true
				mu.Unlock()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("waitServing did not return once every webhook had its handler")
			}
		})
	}
}

// TestWaitServingWithoutWebhookPaths: a controller with a webhook port but
// no webhooks registered is serving once the port answers TLS.
func TestWaitServingWithoutWebhookPaths(t *testing.T) {
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(health.Close)
	webhook := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(webhook.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ports := ControllerPorts{Health: port(t, health.URL), Webhook: port(t, webhook.URL)}
	if err := waitServing(ctx, Controller{Name: "test"}, ports, make(chan struct{}), "/dev/null"); err != nil {
		t.Fatal(err)
	}
}

// port is the port of an httptest server's URL.
func port(t *testing.T, raw string) int {
	t.Helper()
	u, err := neturl.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
