package clusterspec

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// defaultSpec is the seed 004 shape: 3 worker nodes × 2 GPUs of driver
// gpu.example.com. examples/clusters/default.yaml is kept identical by a test.
//
//go:embed default.yaml
var defaultSpec []byte

// Default returns the default cluster.
func Default() *Cluster {
	c, err := Parse(defaultSpec)
	if err != nil {
		panic(fmt.Sprintf("embedded default cluster spec is invalid: %v", err))
	}
	return c
}

// DefaultYAML returns the default cluster spec file as written.
func DefaultYAML() []byte { return bytes.Clone(defaultSpec) }

// PreemptionYAML is seed 004's cluster plus 3 nodes × 2 example.com/accel
// (an extended resource, as a device plugin advertises it): the cluster of
// the preemption scenarios, DRA and extended resource side by side. Pods
// with GPU claims cannot use the accel nodes, so the GPU scenarios are seed
// 004's exactly.
const PreemptionYAML = `nodePools:
- name: worker
  count: 3
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
- name: accel
  count: 3
  capacity: {cpu: "8", memory: 32Gi, pods: "110", example.com/accel: "2"}
`

// Load reads and validates a cluster spec file.
func Load(path string) (*Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading cluster spec: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("cluster spec %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a cluster spec. Unknown fields are errors, so a
// typo does not silently produce a different cluster.
func Parse(b []byte) (*Cluster, error) {
	var c Cluster
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if errs := Validate(&c); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &c, nil
}
