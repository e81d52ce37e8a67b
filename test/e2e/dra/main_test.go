// Package dra checks Lockstep's DRA allocation on the local control plane
// with GPUs and NICs that share PCIe roots: shared claims pin their pods,
// matchAttribute constraints hold, and a NoSchedule device taint removes
// only that device.
package dra

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// spec: 2 nodes × 4 GPUs + 2 NICs; GPUs 0-1 and eth0 share pci-0, GPUs 2-3 and eth1 pci-1.
const spec = `
nodePools:
- name: node
  count: 2
  capacity: {cpu: "32", memory: 128Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 4
    attributes:
      resource.kubernetes.io/pcieRoot: {string: "pci-{{div .Index 2}}"}
  - driver: nic.example.com
    count: 2
    nameTemplate: "eth{{.Index}}"
    attributes:
      resource.kubernetes.io/pcieRoot: {string: "pci-{{.Index}}"}
`

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec)})
}
