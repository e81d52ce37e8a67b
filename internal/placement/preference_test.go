package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// Preferences break ties between equally tight nodes; they never beat
// tightness.
func TestPreferencesBreakTies(t *testing.T) {
	const spec = `
nodePools:
- name: a
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {zone: a}
- name: b
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {zone: b}
`
	preferB := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight:     10,
		Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
	}}}}
	tests := []struct {
		name     string
		affinity *corev1.Affinity
		taintA   corev1.TaintEffect
		tolerate bool
		// fillA: a pod already on a-0, which makes it the tighter node.
		fillA bool
		want  string
	}{
		{name: "no preference: by name", want: "a-0"},
		{name: "preferred node affinity", affinity: preferB, want: "b-0"},
		{name: "tightness beats preference", affinity: preferB, fillA: true, want: "a-0"},
		{name: "an untolerated PreferNoSchedule taint", taintA: corev1.TaintEffectPreferNoSchedule, want: "b-0"},
		{name: "a tolerated PreferNoSchedule taint", taintA: corev1.TaintEffectPreferNoSchedule, tolerate: true, want: "a-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, spec)
			for _, n := range in.Nodes {
				if n.Name == "a-0" && tc.taintA != "" {
					n.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: tc.taintA}}
				}
			}
			if tc.fillA {
				in.Pods = append(in.Pods, builders.MakePod().Namespace("ns").Name("running").Node("a-0").Req(corev1.ResourceCPU, "2").Obj())
			}
			p := builders.MakePod().Namespace("ns").Name("p").Req(corev1.ResourceCPU, "1").Obj()
			p.Spec.Affinity = tc.affinity
			if tc.tolerate {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}
			}
			snap := snapshot.New(in)
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: []Member{{Pod: p}}})
			if err != nil || len(res.Assignments) != 1 {
				t.Fatalf("placed %d, err %v", len(res.Assignments), err)
			}
			if got := res.Assignments[0].Node; got != tc.want {
				t.Errorf("placed on %s, want %s", got, tc.want)
			}
		})
	}
}
