package preflight

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// Every kind of this release's CRDs must be served: a cluster upgraded
// without its new CRDs (helm upgrade leaves crds/ alone) fails the check,
// naming the missing kind; one with all of them passes.
func TestCheckCRDs(t *testing.T) {
	all := []string{"podgroups", "compositepodgroups", "workloads"}
	for _, tc := range []struct {
		name       string
		served     []string
		want       Status
		wantDetail string
	}{
		{name: "every kind served", served: all, want: OK, wantDetail: "CompositePodGroup, PodGroup, Workload served"},
		{name: "a helm upgrade that did not apply the CompositePodGroup CRD", served: []string{"podgroups", "workloads"}, want: Fail,
			wantDetail: "not served: CompositePodGroup scheduling.lockstep.dev/v1beta1"},
		{name: "no Lockstep at all", want: Fail, wantDetail: "PodGroup scheduling.lockstep.dev/v1beta1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			var res []metav1.APIResource
			for _, r := range tc.served {
				res = append(res, metav1.APIResource{Name: r, Namespaced: true})
			}
			if len(res) > 0 {
				client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "scheduling.lockstep.dev/v1beta1", APIResources: res}}
			}
			var r Report
			r.checkCRDs(client)
			if len(r.Checks) != 1 {
				t.Fatalf("checks %+v, want one", r.Checks)
			}
			c := r.Checks[0]
			if c.Status != tc.want || !strings.Contains(c.Detail, tc.wantDetail) {
				t.Errorf("got %s %q, want %s containing %q", c.Status, c.Detail, tc.want, tc.wantDetail)
			}
			if tc.want == Fail && !strings.Contains(c.Fix, "crds") {
				t.Errorf("fix %q does not say to apply the CRDs", c.Fix)
			}
		})
	}
}
