package preflight

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

// The 1.36 → 1.37 check warns about in-tree gang objects stored at
// scheduling.k8s.io/v1alpha2 and about gates 1.37 removed, each with its
// fix; passes a 1.36 cluster with neither; says it could not read the
// gates rather than pass them; and adds no row on other versions.
func TestCheckUpgrade(t *testing.T) {
	metrics := `# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="GangScheduling",stage="ALPHA"} 1
kubernetes_feature_enabled{name="GenericWorkload",stage="ALPHA"} 1
kubernetes_feature_enabled{name="WorkloadAwarePreemption",stage="ALPHA"} 0
`
	objects := func(counts map[string]int) func(string) (int, error) {
		return func(res string) (int, error) { return counts[res], nil }
	}
	for _, tc := range []struct {
		name       string
		minor      int
		view       upgradeView
		want       []Status
		wantDetail []string
		wantFix    []string
		notDetail  string
	}{
		{name: "1.36 with alpha objects and a removed gate", minor: 36,
			view: upgradeView{objects: objects(map[string]int{"workloads": 2, "podgroups": 3}), gates: func() (map[string]bool, error) { return enabledGates(metrics), nil }},
			want: []Status{Warn}, wantDetail: []string{"2 workloads of scheduling.k8s.io/v1alpha2", "3 podgroups of scheduling.k8s.io/v1alpha2", "feature gate GangScheduling is on"},
			wantFix:   []string{"kubectl delete podgroups.v1alpha2.scheduling.k8s.io -A --all", "remove GangScheduling from --feature-gates"},
			notDetail: "WorkloadAwarePreemption"},
		{name: "1.36, clean", minor: 36,
			view: upgradeView{objects: objects(nil), gates: func() (map[string]bool, error) { return map[string]bool{"GenericWorkload": true}, nil }},
			want: []Status{OK}, wantDetail: []string{"no gate 1.37 removed is on"}},
		{name: "1.36, gates unreadable", minor: 36,
			view: upgradeView{objects: objects(nil), gates: func() (map[string]bool, error) { return nil, errors.New("forbidden") }},
			want: []Status{Info, OK}, wantDetail: []string{"gates are unreadable (/metrics: forbidden)"}, wantFix: []string{"remove GangScheduling and WorkloadAwarePreemption"}},
		{name: "1.37", minor: 37, view: upgradeView{objects: objects(map[string]int{"podgroups": 1})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Report
			r.checkUpgrade(tc.minor, tc.view)
			var got []Status
			var details, fixes []string
			for _, c := range r.Checks {
				got = append(got, c.Status)
				details, fixes = append(details, c.Detail), append(fixes, c.Fix)
			}
			if len(got) != len(tc.want) || strings.Join(statusStrings(got), ",") != strings.Join(statusStrings(tc.want), ",") {
				t.Fatalf("statuses %v, want %v (%+v)", got, tc.want, r.Checks)
			}
			for _, w := range tc.wantDetail {
				if !strings.Contains(strings.Join(details, "\n"), w) {
					t.Errorf("details %q, want %q", details, w)
				}
			}
			if tc.notDetail != "" && strings.Contains(strings.Join(details, "\n"), tc.notDetail) {
				t.Errorf("details %q name %s, which is off", details, tc.notDetail)
			}
			for _, w := range tc.wantFix {
				if !strings.Contains(strings.Join(fixes, "\n"), w) {
					t.Errorf("fixes %q, want %q", fixes, w)
				}
			}
		})
	}
}

func statusStrings(s []Status) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

// The DeviceTaintRule row is honest about the version Lockstep reads: v1
// served is read; v1beta2 alone is served but not read, and says so.
func TestTaintRuleRow(t *testing.T) {
	for _, tc := range []struct {
		gv           string
		wantLockstep string
	}{
		{gv: "resource.k8s.io/v1", wantLockstep: "reads DeviceTaintRules like slice taints"},
		{gv: "resource.k8s.io/v1beta2", wantLockstep: "does not read them"},
	} {
		client := fake.NewSimpleClientset()
		client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: tc.gv, APIResources: []metav1.APIResource{{Name: "devicetaintrules"}}}}
		row := taintRuleRow(client)
		if row.Cluster != Served || !strings.Contains(row.Lockstep, tc.wantLockstep) {
			t.Errorf("%s: row %+v, want served and Lockstep %q", tc.gv, row, tc.wantLockstep)
		}
	}
}
