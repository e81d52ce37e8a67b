package placement

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// TestNodesReservedForAGangAreItsAlone: a node tainted
// scheduling.lockstep.dev/reserved-for (asked of Karpenter for a forming
// gang) takes the gang it is reserved for, and no other unit — Lockstep's
// or a pod tolerating some other taint — while the reservation stands.
func TestNodesReservedForAGangAreItsAlone(t *testing.T) {
	const spec = `
nodePools:
- name: new
  count: 2
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  taints: [{key: scheduling.lockstep.dev/reserved-for, value: %s, effect: NoSchedule}]
- name: old
  count: 1
  capacity: {cpu: "2", memory: 4Gi, pods: "110"}
`
	for _, tc := range []struct {
		name        string
		deciding    string // the unit the snapshot is decided for
		tolerateAll bool
		wantPlaced  int
		wantReason  string
	}{
		{name: "the gang it is reserved for", deciding: "ml/train", wantPlaced: 2},
		{name: "another gang", deciding: "ml/other", wantReason: "node(s) had untolerated taint {scheduling.lockstep.dev/reserved-for: " + podgroup.UnitHash("ml/train") + "}"},
		{name: "no unit named (explain of a lone pod)", deciding: "", wantReason: "node(s) had untolerated taint {scheduling.lockstep.dev/reserved-for: " + podgroup.UnitHash("ml/train") + "}"},
		{name: "a pod tolerating every taint, as kube-scheduler judges it", deciding: "ml/other", tolerateAll: true, wantPlaced: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			snap := snapshot.New(cluster(t, fmt.Sprintf(spec, podgroup.UnitHash("ml/train"))))
			if tc.deciding != "" {
				snap.ReservedFor = podgroup.UnitHash(tc.deciding)
			}
			var members []Member
			for i := range 2 {
				p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("r-%d", i)).Req(corev1.ResourceCPU, "6").Obj()
				if tc.tolerateAll {
					p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				}
				members = append(members, Member{Pod: p})
			}
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: members, MinCount: 2, Gang: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Assignments) != tc.wantPlaced {
				t.Fatalf("placed %d, want %d: %+v", len(res.Assignments), tc.wantPlaced, res.Unplaced)
			}
			for _, a := range res.Assignments {
				if a.Node == "old-0" {
					t.Errorf("placed on old-0, which cannot hold 6 CPUs")
				}
			}
			if tc.wantReason != "" {
				if got := res.Unplaced[0].Diagnosis.Reasons[tc.wantReason]; got != 2 {
					t.Errorf("reasons %v: want %q on 2 nodes", res.Unplaced[0].Diagnosis.Reasons, tc.wantReason)
				}
			}
		})
	}
}
