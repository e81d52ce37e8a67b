package preflight

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// alphaGangAPI is the group version Kubernetes 1.36 serves the in-tree
// Workload and PodGroup at; 1.37 serves them at scheduling.k8s.io/v1beta1
// only and converts no alpha object.
var alphaGangAPI = schema.GroupVersion{Group: "scheduling.k8s.io", Version: "v1alpha2"}

// removedIn137 are the 1.36 feature gates Kubernetes 1.37 no longer knows
// (a component started with one refuses to start), with what replaces them.
var removedIn137 = map[string]string{
	"GangScheduling":          "GenericWorkload (beta in 1.37, off by default) turns gang scheduling on",
	"WorkloadAwarePreemption": "GenericWorkload (beta in 1.37, off by default) turns workload-aware preemption on",
}

// upgradeView is what the 1.36 → 1.37 check reads, so tests can give it
// without an API server: the objects of a resource at alphaGangAPI, and the
// feature gates the API server reports enabled (its /metrics).
type upgradeView struct {
	objects func(resource string) (int, error)
	gates   func() (map[string]bool, error)
}

// liveUpgradeView reads the cluster: a LIST of each alpha resource (where
// served) and the API server's kubernetes_feature_enabled metric.
func liveUpgradeView(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) upgradeView {
	return upgradeView{
		objects: func(resource string) (int, error) {
			if !served(client, alphaGangAPI.String(), resource) {
				return 0, nil
			}
			list, err := dyn.Resource(alphaGangAPI.WithResource(resource)).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			return len(list.Items), nil
		},
		gates: func() (map[string]bool, error) {
			body, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			if err != nil {
				return nil, err
			}
			return enabledGates(string(body)), nil
		},
	}
}

var featureEnabled = regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{[^}]*name="([^"]+)"[^}]*\}\s+1\s*$`)

// enabledGates parses the kubernetes_feature_enabled samples of a
// Prometheus text exposition: the gates whose value is 1.
func enabledGates(metrics string) map[string]bool {
	out := map[string]bool{}
	for _, m := range featureEnabled.FindAllStringSubmatch(metrics, -1) {
		out[m[1]] = true
	}
	return out
}

// checkUpgrade is the 1.36 → 1.37 check of a self-managed control plane
// (a managed one, EKS, never serves the alpha API nor takes these gates):
// in-tree gang objects stored at scheduling.k8s.io/v1alpha2, which 1.37
// neither serves nor converts, and gates 1.37 removed, on which its
// components refuse to start. Other versions get no row.
func (r *Report) checkUpgrade(minor int, v upgradeView) {
	if minor != 36 {
		return
	}
	const name = "upgrade to 1.37"
	var problems, fixes []string
	for _, res := range []string{"workloads", "podgroups"} {
		n, err := v.objects(res)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s %s unreadable (%v)", alphaGangAPI, res, err))
		case n > 0:
			problems = append(problems, fmt.Sprintf("%d %s of %s", n, res, alphaGangAPI))
			fixes = append(fixes, fmt.Sprintf("delete the %s %s before upgrading (`kubectl delete %s.%s.%s -A --all`): 1.37 serves them at scheduling.k8s.io/v1beta1 only and converts no alpha object; a Job's are recreated by its controller, and Lockstep's own groups (scheduling.lockstep.dev) are not affected",
				alphaGangAPI, res, res, alphaGangAPI.Version, alphaGangAPI.Group))
		}
	}
	gates, err := v.gates()
	if err != nil {
		r.add(name+": feature gates", Info, fmt.Sprintf("the API server's gates are unreadable (/metrics: %v)", err),
			"before upgrading, remove "+strings.Join(slices.Sorted(maps.Keys(removedIn137)), " and ")+" from every component's --feature-gates: 1.37 no longer knows them")
	}
	for _, gate := range slices.Sorted(maps.Keys(removedIn137)) {
		if gates[gate] {
			problems = append(problems, fmt.Sprintf("feature gate %s is on", gate))
			fixes = append(fixes, fmt.Sprintf("remove %s from --feature-gates of every component before upgrading (1.37 refuses to start with it): %s", gate, removedIn137[gate]))
		}
	}
	if len(problems) == 0 {
		r.add(name, OK, fmt.Sprintf("no %s Workload or PodGroup stored; no gate 1.37 removed is on", alphaGangAPI), "")
		return
	}
	r.add(name, Warn, strings.Join(problems, "; "), strings.Join(fixes, "; "))
}
