// Package partitions checks partitionable devices (MIG) on the local control
// plane: examples/clusters/mig.yaml, 2 nodes × 2 GPUs, each GPU published
// whole and as 7 1g and 2 3g partitions sharing its counters. A gang of
// partitions is placed whole, packed onto as few GPUs as it fits; a gang
// that wants whole GPUs waits while every GPU has a partition in use, says
// so in GPUs (a partition is not a GPU), and binds once GPUs are freed.
package partitions

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.ExampleCluster("mig.yaml")})
}
