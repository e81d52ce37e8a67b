package explain

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// resolve turns a target into the unit the scheduler would schedule.
func resolve(ctx context.Context, client kubernetes.Interface, st *state, t Target) (*unit, error) {
	switch t.Kind {
	case "podgroup", "podgroups", "pg":
		pg := st.groups[t.Namespace+"/"+t.Name]
		if pg == nil {
			return nil, fmt.Errorf("PodGroup %s/%s not found", t.Namespace, t.Name)
		}
		return groupUnit(st, pg, t.Namespace, t.Name), nil
	case "job", "jobs":
		job, err := client.BatchV1().Jobs(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("Job %s/%s: %w", t.Namespace, t.Name, err)
		}
		u := groupUnit(st, st.groups[t.Namespace+"/"+t.Name], t.Namespace, t.Name)
		u.job = job
		if u.group == nil {
			// Not a gang: explain its first pending pod.
			for i := range st.pods {
				p := &st.pods[i]
				if p.Namespace == t.Namespace && p.Labels[batchJobNameLabel] == t.Name && podgroup.Pending(p) {
					pu := podUnit(st, p)
					pu.job = job
					return pu, nil
				}
			}
			u.label = "Job " + t.Namespace + "/" + t.Name
			u.minCount = int(ptrOr(job.Spec.Parallelism, 1))
		}
		return u, nil
	case "pod", "pods", "po":
		p := st.pod(t.Namespace, t.Name)
		if p == nil {
			return nil, fmt.Errorf("pod %s/%s not found", t.Namespace, t.Name)
		}
		if g := podgroup.GroupOf(p); g != "" {
			return groupUnit(st, st.groups[t.Namespace+"/"+g], t.Namespace, g), nil
		}
		return podUnit(st, p), nil
	}
	return nil, fmt.Errorf("cannot explain %q: want podgroup, job or pod", t.Kind)
}

const batchJobNameLabel = "batch.kubernetes.io/job-name"

func ptrOr(p *int32, d int32) int32 {
	if p == nil {
		return d
	}
	return *p
}

// groupUnit collects a group's Lockstep members (pg may be nil: the pods
// name a group that does not exist).
func groupUnit(st *state, pg *lockv1.PodGroup, ns, name string) *unit {
	u := &unit{label: "PodGroup " + ns + "/" + name, group: pg, minCount: 1}
	if pg != nil {
		if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
			u.gang, u.minCount = true, int(g.MinCount)
		}
		u.priority = st.groupPriority(pg)
	}
	for i := range st.pods {
		p := &st.pods[i]
		if p.Namespace != ns || podgroup.GroupOf(p) != name || !podgroup.Ours(p) || !podgroup.Admits(pg, p) {
			continue
		}
		switch {
		case podgroup.Holds(p, incarnation(pg)):
			// Bound and staying, or finished: counts toward minCount.
			u.members = append(u.members, p)
			u.bound++
		case podgroup.Pending(p) && podgroup.Gated(p):
			u.members = append(u.members, p)
			u.gated++
		case podgroup.Pending(p):
			u.members = append(u.members, p)
			u.pending = append(u.pending, p)
		}
	}
	sort.Slice(u.pending, func(i, j int) bool { return u.pending[i].Name < u.pending[j].Name })
	return u
}

func podUnit(st *state, p *corev1.Pod) *unit {
	u := &unit{label: "pod " + p.Namespace + "/" + p.Name, minCount: 1, members: []*corev1.Pod{p}}
	if p.Spec.Priority != nil {
		u.priority = *p.Spec.Priority
	}
	switch {
	case podgroup.Pending(p) && podgroup.Gated(p):
		u.gated = 1
	case podgroup.Pending(p):
		u.pending = []*corev1.Pod{p}
	default:
		u.bound = 1
	}
	return u
}

func incarnation(pg *lockv1.PodGroup) *lockv1.PodGroupIncarnation {
	if pg == nil {
		return nil
	}
	return pg.Status.Incarnation
}
