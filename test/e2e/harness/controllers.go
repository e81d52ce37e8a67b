package harness

import (
	"context"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// Controller is another project's controller the tests run beside Lockstep
// (devcluster.Controller).
type Controller = devcluster.Controller

// The projects' controllers the integration and autoscaling tests run.
var (
	JobSetController           = devcluster.JobSetController
	LWSController              = devcluster.LWSController
	KueueController            = devcluster.KueueController
	TrainingOperatorController = devcluster.TrainingOperatorController
	MPIOperatorController      = devcluster.MPIOperatorController
	KubeRayController          = devcluster.KubeRayController
	TrainerController          = devcluster.TrainerController
	KarpenterController        = devcluster.KarpenterController
)

// StartController installs c's CRDs and webhooks and runs it until the
// package's cluster goes down (its log is kept with the cluster's on
// failure). It returns once the controller is ready and its webhooks
// answer.
func (h *Harness) StartController(ctx context.Context, c Controller) error {
	stop, err := h.Cluster.StartController(ctx, c, h.RepoRoot)
	if err != nil {
		return err
	}
	h.stops = append(h.stops, stop)
	return nil
}
