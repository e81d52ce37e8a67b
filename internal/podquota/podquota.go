package podquota

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/utils/clock"
)

// Exceeded is a ResourceQuota with no room for one more pod.
type Exceeded struct {
	// Quota is the ResourceQuota's name, Resource the quota resource
	// (e.g. requests.nvidia.com/gpu, pods, count/pods).
	Quota    string
	Resource corev1.ResourceName
	// Hard is the quota's spec.hard; Used what the namespace's pods that
	// it counts use now; Requested what one more pod would.
	Hard, Used, Requested resource.Quantity
}

// Needed is the hard limit that would admit n more such pods.
func (e *Exceeded) Needed(n int) resource.Quantity {
	q := e.Used.DeepCopy()
	for range n {
		q.Add(e.Requested)
	}
	return q
}

func (e *Exceeded) String() string {
	return fmt.Sprintf("ResourceQuota %s: %s %s used of %s, a pod requests %s", e.Quota, e.Resource, e.Used.String(), e.Hard.String(), e.Requested.String())
}

// Checker counts pods against quotas. Its zero value is not usable: New.
type Checker struct{ eval quota.Evaluator }

// New returns a Checker; clock says when a terminating pod's grace period
// is over (it no longer counts for compute resources).
func New(clk clock.Clock) Checker {
	return Checker{eval: core.NewPodEvaluator(nil, clk)}
}

// Room returns the first quota (by name) with no room for pod beside pods
// (the pods of its namespace that exist; pod may be one of them: the
// question is one more like it), nil when every quota that counts pod has
// room. A quota's spec.hard is the limit (its status may lag behind an
// edit).
func (c Checker) Room(quotas []corev1.ResourceQuota, pods []*corev1.Pod, pod *corev1.Pod) (*Exceeded, error) {
	ordered := slices.Clone(quotas)
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Name < ordered[j].Name })
	for i := range ordered {
		q := ordered[i].DeepCopy()
		if q.Namespace != pod.Namespace {
			continue
		}
		q.Status.Hard = q.Spec.Hard // what Matches reads
		ok, err := c.eval.Matches(q, pod)
		if err != nil {
			return nil, fmt.Errorf("ResourceQuota %s: %w", q.Name, err)
		}
		if !ok {
			continue
		}
		names := c.eval.MatchingResources(quota.ResourceNames(q.Spec.Hard))
		requested, err := c.eval.Usage(pod)
		if err != nil {
			return nil, err
		}
		requested = quota.Mask(requested, names)
		used, err := c.used(q, pods, names)
		if err != nil {
			return nil, err
		}
		if e := exceeded(q, used, requested); e != nil {
			return e, nil
		}
	}
	return nil, nil
}

// Forbids returns the first quota (by name) that admits no pod like pod at
// all — one whose scopes count it and whose hard limit of pods (pods,
// count/pods) is 0, as a quota with `scopeSelector: PriorityClass In [x]`
// and `pods: 0` forbids class x in its namespace — or nil.
func (c Checker) Forbids(quotas []corev1.ResourceQuota, pod *corev1.Pod) (*Exceeded, error) {
	bare := pod.DeepCopy()
	bare.Spec.Containers = []corev1.Container{{Name: "c"}} // only the pod counts, not what it asks for
	bare.Spec.InitContainers, bare.Spec.Overhead = nil, nil
	e, err := c.Room(quotas, nil, bare)
	if err != nil || e == nil || (e.Resource != corev1.ResourcePods && e.Resource != "count/pods") || !e.Hard.IsZero() {
		return nil, err
	}
	return e, nil
}

// used sums what the pods q counts use of names.
func (c Checker) used(q *corev1.ResourceQuota, pods []*corev1.Pod, names []corev1.ResourceName) (corev1.ResourceList, error) {
	used := corev1.ResourceList{}
	for _, p := range pods {
		if p.Namespace != q.Namespace {
			continue
		}
		ok, err := c.eval.Matches(q, p)
		if err != nil || !ok {
			continue // a pod the quota's scopes cannot judge is not counted by it either
		}
		u, err := c.eval.Usage(p)
		if err != nil {
			return nil, err
		}
		used = quota.Add(used, quota.Mask(u, names))
	}
	return used, nil
}

// exceeded is the first resource (by name) of which requested more would
// pass q's hard limit.
func exceeded(q *corev1.ResourceQuota, used, requested corev1.ResourceList) *Exceeded {
	names := quota.ResourceNames(requested)
	slices.Sort(names)
	for _, r := range names {
		hard, ok := q.Spec.Hard[r]
		if !ok {
			continue
		}
		total := used[r].DeepCopy()
		total.Add(requested[r])
		if total.Cmp(hard) > 0 {
			return &Exceeded{Quota: q.Name, Resource: r, Hard: hard, Used: used[r].DeepCopy(), Requested: requested[r].DeepCopy()}
		}
	}
	return nil
}
