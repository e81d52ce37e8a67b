package integrity

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// nodeOrDeviceLost judges a running member: lost when its node is gone or
// NotReady past the grace period — as read from the API server, the node
// cache alone being asked to confirm — or when one of its claims holds a
// device tainted NoExecute that its allocation does not tolerate (for long
// enough); else how long until such a condition, already present, becomes a
// loss.
func (v View) nodeOrDeviceLost(j *judgement, p *corev1.Pod) {
	if reason, detail, wait := v.nodeLost(j, p); reason != "" {
		j.lose(reason, detail)
		return
	} else if wait > 0 {
		j.soon(wait)
	}
	if reason, detail, wait := v.deviceLost(p); reason != "" {
		j.lose(reason, detail)
	} else if wait > 0 {
		j.soon(wait)
	}
}

// nodeLost is nodeOrDeviceLost for the member's node.
func (v View) nodeLost(j *judgement, p *corev1.Pod) (reason, detail string, wait time.Duration) {
	node, ok, read := v.node(p.Spec.NodeName)
	if !ok && !read {
		j.confirmNode(p.Spec.NodeName)
		return "", "", 0
	}
	if !ok {
		return ReasonNodeLost, fmt.Sprintf("node %s of pod %s was deleted", p.Spec.NodeName, p.Name), 0
	}
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady || c.Status == corev1.ConditionTrue {
			continue
		}
		since := v.Now.Sub(c.LastTransitionTime.Time)
		if since < v.NodeGrace {
			wait = v.NodeGrace - since
			continue
		}
		if !read {
			j.confirmNode(node.Name)
			return "", "", 0
		}
		return ReasonNodeLost, fmt.Sprintf("node %s of pod %s has been NotReady for %s", node.Name, p.Name, since.Round(time.Second)), 0
	}
	return "", "", wait
}

// deviceLost is nodeOrDeviceLost for the member's devices.
func (v View) deviceLost(p *corev1.Pod) (reason, detail string, wait time.Duration) {
	for _, name := range snapshot.PodClaimNames(p) {
		claim := v.Claim(p.Namespace, name)
		if claim == nil || claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			for _, t := range v.Taints(id) {
				at, ok := evictionTime(t, r.Tolerations)
				if !ok {
					continue
				}
				if d := at.Sub(v.Now); d > 0 {
					if wait == 0 || d < wait {
						wait = d
					}
					continue
				}
				return ReasonDeviceFailed, fmt.Sprintf("device %s/%s of pod %s is tainted %s=%s:NoExecute", r.Pool, r.Device, p.Name, t.Key, t.Value), 0
			}
		}
	}
	return "", "", wait
}

// evictionTime is when a NoExecute taint evicts a device's users given the
// tolerations its allocation was made with, as kube-controller-manager's
// device-taint-eviction controller computes it: at once unless tolerated;
// never when tolerated without tolerationSeconds; else timeAdded plus the
// smallest tolerationSeconds of the matching tolerations. ok is false when
// the taint never evicts (another effect, or tolerated for ever).
func evictionTime(t resourcev1.DeviceTaint, tolerations []resourcev1.DeviceToleration) (time.Time, bool) {
	if t.Effect != resourcev1.DeviceTaintEffectNoExecute {
		return time.Time{}, false
	}
	var added time.Time
	if t.TimeAdded != nil {
		added = t.TimeAdded.Time
	}
	seconds, tolerated := int64(-1), false
	for _, tol := range tolerations {
		if tol.Effect != resourcev1.DeviceTaintEffectNoExecute && tol.Effect != "" || !resourceclaim.ToleratesTaint(tol, t) {
			continue
		}
		if tol.TolerationSeconds == nil {
			return time.Time{}, false
		}
		s := max(*tol.TolerationSeconds, 0)
		if !tolerated || s < seconds {
			seconds = s
		}
		tolerated = true
	}
	if !tolerated {
		return added, true
	}
	return added.Add(time.Duration(seconds) * time.Second), true
}
