package apidiscovery

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// RestartWhenServed is a manager runnable for a component that started
// without a kind the API server did not serve (a CRD an upgrade left out):
// it polls discovery and, once the kind is served, ends with an error, so
// the process exits and its Deployment restarts it with the kind's
// informers, watches and indexes — which a running manager cannot add.
// It runs on every replica (not only the leader): a standby started
// without the kind must not become leader without it.
type RestartWhenServed struct {
	Discovery              discovery.DiscoveryInterface
	GroupVersion, Resource string
	// Interval between checks; 30 s when zero.
	Interval time.Duration
}

// Start polls until the kind is served (an error: restart) or ctx ends (nil).
func (r RestartWhenServed) Start(ctx context.Context) error {
	interval := r.Interval
	if interval == 0 {
		interval = 30 * time.Second
	}
	err := wait.PollUntilContextCancel(ctx, interval, false, func(context.Context) (bool, error) {
		served, err := Serves(r.Discovery, r.GroupVersion, r.Resource)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Discovery failed; trying again", "groupVersion", r.GroupVersion, "err", err)
		}
		return served, nil
	})
	if err != nil {
		return nil // ctx ended
	}
	return fmt.Errorf("%s %s is served now: exiting so that the restarted process watches it", r.Resource, r.GroupVersion)
}

// NeedLeaderElection is false: every replica watches for the kind.
func (RestartWhenServed) NeedLeaderElection() bool { return false }
