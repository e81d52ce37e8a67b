package jobintegration

import (
	"context"
	"time"

	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
)

// Enabler runs each integration's setup once the API server serves its
// kind: at start for the kinds served then, and when a CRD is installed
// later (discovery is asked again every Interval for the others), so
// installing JobSet after Lockstep needs no restart. It is a manager
// runnable.
type Enabler struct {
	Discovery    discovery.DiscoveryInterface
	Integrations Set
	Setup        func(Integration) error
	Interval     time.Duration
	pending      Set
}

// Prepare sets up the integrations served now and keeps the others for
// Start; call it before the manager starts.
func (e *Enabler) Prepare() error {
	for _, integ := range e.Integrations {
		ok, err := e.serves(integ)
		if err != nil {
			return err
		}
		if !ok {
			ctrl.Log.WithName("integrations").Info("Kind not served by the API server yet: enabled once its CRD is installed", "integration", integ.Name(), "kind", integ.GVK().String())
			e.pending = append(e.pending, integ)
			continue
		}
		if err := e.Setup(integ); err != nil {
			return err
		}
	}
	return nil
}

func (e *Enabler) serves(integ Integration) (bool, error) {
	return apidiscovery.Serves(e.Discovery, integ.GVK().GroupVersion().String(), integ.Resource())
}

// Start implements manager.Runnable: it polls for the pending kinds.
func (e *Enabler) Start(ctx context.Context) error {
	logger := ctrl.Log.WithName("integrations")
	tick := time.NewTicker(e.Interval)
	defer tick.Stop()
	for len(e.pending) > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var still Set
		for _, integ := range e.pending {
			ok, err := e.serves(integ)
			if err != nil {
				logger.Error(err, "Discovery failed; asking again later", "integration", integ.Name())
			}
			if !ok {
				still = append(still, integ)
				continue
			}
			if err := e.Setup(integ); err != nil {
				return err
			}
			logger.Info("Kind now served: integration enabled", "integration", integ.Name(), "kind", integ.GVK().String())
		}
		e.pending = still
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica prepares the same controllers (they run on the leader only).
func (e *Enabler) NeedLeaderElection() bool { return false }
