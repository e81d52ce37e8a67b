package podquota_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lockstep-dev/lockstep/internal/podquota"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func quota(name string, hard corev1.ResourceList, scopes ...corev1.ScopedResourceSelectorRequirement) corev1.ResourceQuota {
	q := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if len(scopes) > 0 {
		q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: scopes}
	}
	return q
}

func gpuPod(name string, phase corev1.PodPhase) *corev1.Pod {
	p := builders.MakePod().Namespace("ml").Name(name).Req("example.com/gpu", "1").Req(corev1.ResourceCPU, "500m").Obj()
	p.Status.Phase = phase
	return p
}

// A quota has room for one more pod exactly when the API server's quota
// admission would let it in: what the pods it counts use plus what the pod
// requests stays within spec.hard, for every resource it limits.
func TestRoom(t *testing.T) {
	gpus := func(n string) corev1.ResourceList {
		return corev1.ResourceList{"requests.example.com/gpu": resource.MustParse(n)}
	}
	four := []*corev1.Pod{gpuPod("a", corev1.PodRunning), gpuPod("b", corev1.PodRunning), gpuPod("c", corev1.PodPending), gpuPod("d", corev1.PodPending)}
	high := corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}
	for name, tc := range map[string]struct {
		quotas []corev1.ResourceQuota
		pods   []*corev1.Pod
		want   *podquota.Exceeded
	}{
		"no quota":                      {pods: four},
		"room for one more":             {quotas: []corev1.ResourceQuota{quota("gpu", gpus("5"))}, pods: four},
		"no GPU left":                   {quotas: []corev1.ResourceQuota{quota("gpu", gpus("4"))}, pods: four, want: &podquota.Exceeded{Quota: "gpu", Resource: "requests.example.com/gpu", Hard: resource.MustParse("4"), Used: resource.MustParse("4"), Requested: resource.MustParse("1")}},
		"finished pods free their GPUs": {quotas: []corev1.ResourceQuota{quota("gpu", gpus("4"))}, pods: []*corev1.Pod{gpuPod("a", corev1.PodSucceeded), gpuPod("b", corev1.PodFailed), gpuPod("c", corev1.PodRunning)}},
		"the first quota by name that has no room": {
			quotas: []corev1.ResourceQuota{quota("z-pods", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("4")}), quota("a-cpu", corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("2100m")})},
			pods:   four, want: &podquota.Exceeded{Quota: "a-cpu", Resource: corev1.ResourceRequestsCPU, Hard: resource.MustParse("2100m"), Used: resource.MustParse("2"), Requested: resource.MustParse("500m")},
		},
		"a pod count counts finished pods in count/pods only": {
			quotas: []corev1.ResourceQuota{quota("count", corev1.ResourceList{"count/pods": resource.MustParse("2")})},
			pods:   []*corev1.Pod{gpuPod("a", corev1.PodSucceeded), gpuPod("b", corev1.PodSucceeded)},
			want:   &podquota.Exceeded{Quota: "count", Resource: "count/pods", Hard: resource.MustParse("2"), Used: resource.MustParse("2"), Requested: resource.MustParse("1")},
		},
		"a quota of another priority class does not count the pod": {quotas: []corev1.ResourceQuota{quota("gpu-high", gpus("0"), high)}, pods: four},
		"a quota of another namespace does not count": {quotas: []corev1.ResourceQuota{func() corev1.ResourceQuota {
			q := quota("gpu", gpus("0"))
			q.Namespace = "other"
			return q
		}()}, pods: four},
	} {
		t.Run(name, func(t *testing.T) {
			c := podquota.New(clocktesting.NewFakeClock(time.Unix(0, 0)))
			got, err := c.Room(tc.quotas, tc.pods, gpuPod("next", corev1.PodPending))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want,+got):\n%s", d)
			}
		})
	}
}

func TestNeeded(t *testing.T) {
	e := &podquota.Exceeded{Used: resource.MustParse("4"), Requested: resource.MustParse("2")}
	if got := e.Needed(3); got.String() != "10" {
		t.Errorf("Needed(3) = %s, want 10", got.String())
	}
}

// A quota forbids a pod only when it counts the pod and allows no pod at
// all: a PriorityClass-scoped `pods: 0` forbids that class, not others; a
// quota merely full, or limiting what pods request, forbids nothing.
func TestForbids(t *testing.T) {
	high := corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}
	zero := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	pod := func(class string) *corev1.Pod {
		p := builders.MakePod().Namespace("ml").Name("p").Req("example.com/gpu", "1").Obj()
		p.Spec.PriorityClassName = class
		return p
	}
	for name, tc := range map[string]struct {
		quotas []corev1.ResourceQuota
		class  string
		want   string
	}{
		"pods: 0 for the class":           {quotas: []corev1.ResourceQuota{quota("no-high", zero, high)}, class: "high", want: "no-high"},
		"count/pods: 0 for the class":     {quotas: []corev1.ResourceQuota{quota("no-high", corev1.ResourceList{"count/pods": resource.MustParse("0")}, high)}, class: "high", want: "no-high"},
		"pods: 0 for another class":       {quotas: []corev1.ResourceQuota{quota("no-high", zero, high)}, class: "low"},
		"a pod limit above 0":             {quotas: []corev1.ResourceQuota{quota("few", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}, high)}, class: "high"},
		"no GPU left is not a refusal":    {quotas: []corev1.ResourceQuota{quota("gpu", corev1.ResourceList{"requests.example.com/gpu": resource.MustParse("0")}, high)}, class: "high"},
		"pods: 0 for the whole namespace": {quotas: []corev1.ResourceQuota{quota("none", zero)}, class: "low", want: "none"},
	} {
		t.Run(name, func(t *testing.T) {
			c := podquota.New(clocktesting.NewFakeClock(time.Unix(0, 0)))
			got, err := c.Forbids(tc.quotas, pod(tc.class))
			if err != nil {
				t.Fatal(err)
			}
			if name := func() string {
				if got == nil {
					return ""
				}
				return got.Quota
			}(); name != tc.want {
				t.Errorf("forbidden by %q, want %q", name, tc.want)
			}
		})
	}
}
