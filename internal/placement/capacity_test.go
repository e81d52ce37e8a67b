package placement

import (
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// od-0, od-1 are on-demand and spot-0, spot-1 Karpenter Spot nodes, each
// with 2 GPUs.
const onDemandAndSpot = `
nodePools:
- name: od
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {karpenter.sh/capacity-type: on-demand}
  devices: [{driver: gpu.example.com, count: 2}]
- name: spot
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {karpenter.sh/capacity-type: spot}
  devices: [{driver: gpu.example.com, count: 2}]
`

// A group's capacity types keep its members off the nodes of other types
// (the default leaves spot out), say so for each node left out, and a
// policy that lists spot, or a lone pod, uses Spot nodes.
func TestCapacityTypes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ranks     int
		gang      bool
		policy    podgroup.CapacityTypes
		wantAdmit bool
		wantSpot  bool
	}{
		{name: "default: 4 ranks on the on-demand nodes", ranks: 4, gang: true, policy: podgroup.DefaultCapacityTypes, wantAdmit: true},
		{name: "default: 6 ranks do not fit without Spot", ranks: 6, gang: true, policy: podgroup.DefaultCapacityTypes},
		{name: "spot listed: 6 ranks use Spot too", ranks: 6, gang: true, policy: podgroup.CapacityTypes{podgroup.OnDemand, podgroup.Spot}, wantAdmit: true, wantSpot: true},
		{name: "spot only: the ranks run on Spot", ranks: 4, gang: true, policy: podgroup.CapacityTypes{podgroup.Spot}, wantAdmit: true, wantSpot: true},
		{name: "lone pods (no policy) use any capacity, as kube-scheduler would", ranks: 6, wantAdmit: true, wantSpot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, onDemandAndSpot)
			members := gpuGang(&in, "rank", tc.ranks, "1")
			snap := snapshot.New(in)
			unit := Unit{Members: members, MinCount: tc.ranks, Gang: tc.gang, CapacityTypes: tc.policy}
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), unit)
			if err != nil {
				t.Fatal(err)
			}
			if got := Judge(unit, res).Admitted; got != tc.wantAdmit {
				t.Fatalf("admitted %v, want %v", got, tc.wantAdmit)
			}
			if !tc.wantAdmit {
				want := "node(s) are spot capacity, which the group's capacity-types (on-demand,reserved) exclude"
				if n := res.Unplaced[0].Diagnosis.Reasons[want]; n != 2 {
					t.Errorf("reasons %v, want 2 nodes for %q", res.Unplaced[0].Diagnosis.Reasons, want)
				}
				return
			}
			spot := false
			for _, a := range res.Assignments {
				if strings.HasPrefix(a.Node, "spot-") {
					spot = true
				} else if len(tc.policy) == 1 {
					t.Errorf("%s on %s, outside its only capacity type", a.Pod.Name, a.Node)
				}
			}
			if spot != tc.wantSpot {
				t.Errorf("on Spot %v, want %v", spot, tc.wantSpot)
			}
		})
	}
}
