package explain

import (
	"context"
	"fmt"

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

// groupUnit resolves a group as the scheduler does (podgroup.Resolve; pg
// may be nil: the pods name a group that does not exist).
func groupUnit(st *state, pg *lockv1.PodGroup, ns, name string) *unit {
	pods := make([]*corev1.Pod, len(st.pods))
	for i := range st.pods {
		pods[i] = &st.pods[i]
	}
	u := fromResolved(podgroup.Resolve(pg, ns, name, pods, nil))
	u.label = "PodGroup " + ns + "/" + name
	if pg != nil {
		u.priority = st.groupPriority(pg)
	}
	return u
}

func podUnit(st *state, p *corev1.Pod) *unit {
	u := fromResolved(podgroup.ResolvePod(p, nil))
	u.label = "pod " + p.Namespace + "/" + p.Name
	if p.Spec.Priority != nil {
		u.priority = *p.Spec.Priority
	}
	return u
}

func fromResolved(r *podgroup.Unit) *unit {
	return &unit{group: r.Group, members: r.Members, pending: r.Pending, bound: r.Bound, gated: r.Gated, minCount: r.MinCount(), gang: r.Gang(), resolved: r}
}
