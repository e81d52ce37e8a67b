package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// serveHealth serves /healthz and /readyz (controller-runtime's healthz
// handlers, as the other components use them): alive while the process
// runs and, while it leads, while its Lease is renewed; ready once every
// cache has synced — a standby replica is ready too, so a rollout never
// waits for leadership.
func (s *Scheduler) serveHealth(ctx context.Context) error {
	addr := s.opts.HealthAddr
	if addr == "" || addr == "0" {
		return nil
	}
	live := &healthz.Handler{Checks: map[string]healthz.Checker{
		"ping":            healthz.Ping,
		"leader-election": s.watchdog.Check,
	}}
	ready := &healthz.Handler{Checks: map[string]healthz.Checker{
		"caches": func(*http.Request) error {
			if !s.synced.Load() {
				return fmt.Errorf("informer caches not synced")
			}
			return nil
		},
	}}
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", live))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", live))
	mux.Handle("/readyz", http.StripPrefix("/readyz", ready))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", ready))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Health server stopped")
		}
	}()
	return nil
}
