package preemption

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// workLost is the device-hours evicting c at now throws away: the
// devices its pods hold × the time since its last checkpoint
// (Checkpointed), or since its newest pod started when it reported none
// or an older one. Zero at a zero now (no clock: the order is the one by
// pods and start alone).
func workLost(snap *snapshot.Snapshot, c Candidate, now time.Time) float64 {
	if now.IsZero() {
		return 0
	}
	since := c.lastSaved()
	if !now.After(since) {
		return 0
	}
	devices := 0
	for _, p := range c.Pods {
		devices += podDevices(snap, p)
	}
	return float64(devices) * now.Sub(since).Hours()
}

// podDevices counts the devices a pod holds: those its claims were
// allocated, or else the extended resources (nvidia.com/gpu, …) it
// requests.
func podDevices(snap *snapshot.Snapshot, p *corev1.Pod) int {
	n := 0
	for _, c := range podClaims(snap, p) {
		n += len(c.Status.Allocation.Devices.Results)
	}
	if n > 0 {
		return n
	}
	for _, ctr := range p.Spec.Containers {
		for name, q := range ctr.Resources.Requests {
			if extended(name) {
				n += int(q.Value())
			}
		}
	}
	return n
}

// extended reports whether a resource is an extended resource (a device
// plugin's: a domain-qualified name outside kubernetes.io).
func extended(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/")
}

// WorkLost is the device-hours the plan's victims lose (Victims'
// workLost at the search's now).
func (p *Plan) WorkLost() float64 { return p.workLost }
