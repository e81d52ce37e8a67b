// Package dra checks Lockstep's DRA allocation on the local control plane
// with GPUs and NICs that share PCIe roots: shared claims pin their pods,
// matchAttribute constraints hold, a NoSchedule device taint removes only
// that device, and extended resources backed by DRA are served as
// kube-scheduler serves them.
package dra

import (
	"testing"

	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// spec: 2 nodes × 4 GPUs + 2 NICs; GPUs 0-1 and eth0 share pci-0, GPUs 2-3
// and eth1 pci-1; and one node whose 2 GPUs a device plugin advertises
// (allocatable example.com/gpu), no DRA devices.
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
- name: plugin
  count: 1
  capacity: {cpu: "32", memory: 128Gi, pods: "110", example.com/gpu: "2"}
`

func TestMain(m *testing.M) {
	// kube-scheduler runs beside Lockstep: the extended-resource claims it
	// creates are the reference Lockstep's are compared with.
	harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS, Spec: harness.MustParseSpec(spec),
		Schedulers: []devcluster.Scheduler{devcluster.SchedulerLockstep, devcluster.SchedulerKube}})
}
