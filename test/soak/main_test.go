//go:build soak

// Package soak runs the gang-lifecycle soak (`make soak`, not part of
// `make test`): for LOCKSTEP_SOAK_DURATION (default 10m), gang Jobs are
// created on a 16 × 8-GPU local cluster, run 5–30 s and then succeed (ranks
// at different times), fail, get preempted by a higher-priority gang, or
// lose a node, at random; an observer checks continuously that no gang is
// restarted without a real cause, none stays below minCount past the
// settle time, no device stays allocated to an unbound pod, and every
// restart's reason matches its cause. It prints the counts and fails on any
// violation.
package soak

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

const clusterYAML = `nodePools:
- name: gpu
  count: 16
  capacity: {cpu: "64", memory: 512Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 8
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(clusterYAML)})
}
