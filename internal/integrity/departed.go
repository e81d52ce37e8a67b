package integrity

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// departedTTL bounds how long a deleted pod's last state is kept: long
// enough for any verdict to have seen it (verdicts follow events within
// seconds), short enough to stay small.
const departedTTL = 10 * time.Minute

// departedPods are the last states of group pods deleted recently, from
// their delete events. They only fill the gap between a pod's last update
// and the verdict that follows: a member that succeeded and was deleted at
// once is known to have succeeded even if no verdict saw it finish. The
// verdict then records the outcome in the PodGroup, where it is durable.
type departedPods struct {
	mu        sync.Mutex
	byKey     map[string]map[types.UID]departedPod
	lastPrune time.Time
}

type departedPod struct {
	pod *corev1.Pod
	at  time.Time
}

func (d *departedPods) add(p *corev1.Pod, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byKey == nil {
		d.byKey = map[string]map[types.UID]departedPod{}
	}
	if now.Sub(d.lastPrune) > departedTTL/10 {
		d.lastPrune = now
		for k, pods := range d.byKey {
			for uid, dp := range pods {
				if now.Sub(dp.at) > departedTTL {
					delete(pods, uid)
				}
			}
			if len(pods) == 0 {
				delete(d.byKey, k)
			}
		}
	}
	k := p.Namespace + "/" + podgroup.GroupOf(p)
	if d.byKey[k] == nil {
		d.byKey[k] = map[types.UID]departedPod{}
	}
	d.byKey[k][p.UID] = departedPod{pod: p, at: now}
}

// of returns the departed pods of one group.
func (d *departedPods) of(ns, group string) map[types.UID]*corev1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	pods := d.byKey[ns+"/"+group]
	if len(pods) == 0 {
		return nil
	}
	out := make(map[types.UID]*corev1.Pod, len(pods))
	for uid, dp := range pods {
		out[uid] = dp.pod
	}
	return out
}
