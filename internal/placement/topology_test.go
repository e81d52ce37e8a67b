package placement

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/internal/topology"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// zonedRacks is 8 nodes × 2 GPUs: zones z0 (node-0..3) and z1 (node-4..7),
// racks r0..r3 of 2 nodes, and a device attribute clique alternating
// between nodes (even nodes 0, odd nodes 1) — a domain no label draws.
const zonedRacks = `
nodePools:
- name: node
  count: 8
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  labels: {zone: "z{{div .Index 4}}", rack: "r{{div .Index 2}}"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes:
      clique: {int: "{{mod .NodeIndex 2}}"}
`

// takeGPUs allocates count GPUs of node to running claims.
func takeGPUs(in *snapshot.Input, node string, count int) {
	for i := 0; i < count; i++ {
		c := builders.Claim("other", node+"-busy-"+string(rune('0'+i)), "gpu.example.com", 1)
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "dev", Driver: "gpu.example.com", Pool: node, Device: "gpu-" + string(rune('0'+i)),
		}}}}
		in.Claims = append(in.Claims, c)
	}
}

func TestTopology(t *testing.T) {
	for _, tc := range []struct {
		name     string
		busy     map[string]int // GPUs taken per node
		size     int
		minCount int
		basic    bool
		c        topology.Constraint
		running  []topology.Placed
		// wantNodes are the nodes used; wantDomain the domain reported;
		// wantReason a reason of the first unplaced member (when none fit).
		wantNodes  []string
		wantDomain string
		wantReason string
	}{
		{
			name: "required: the gang goes to the zone with room",
			busy: map[string]int{"node-0": 2, "node-1": 1}, size: 6, minCount: 6,
			c:         topology.Constraint{Required: []string{"zone"}},
			wantNodes: []string{"node-4", "node-5", "node-6"}, wantDomain: "zone=z1",
		},
		{
			name: "preferred: a gang that fits a rack lands in one rack",
			size: 4, minCount: 4,
			c:         topology.Constraint{Preferred: []string{"rack"}},
			wantNodes: []string{"node-0", "node-1"}, wantDomain: "rack=r0",
		},
		{
			name: "preferred rack, required zone: no rack holds 6, one zone does",
			size: 6, minCount: 6,
			c:         topology.Constraint{Required: []string{"zone"}, Preferred: []string{"rack"}},
			wantNodes: []string{"node-0", "node-1", "node-2"}, wantDomain: "zone=z0",
		},
		{
			name: "preferred only: a gang no rack holds goes anywhere",
			busy: map[string]int{"node-0": 2, "node-2": 2, "node-4": 2, "node-6": 2}, size: 4, minCount: 4,
			c:         topology.Constraint{Preferred: []string{"rack"}},
			wantNodes: []string{"node-1", "node-3"}, wantDomain: "all nodes",
		},
		{
			name: "later members go to the rack the gang runs in, not the emptiest",
			busy: map[string]int{"node-4": 1}, size: 2, minCount: 1,
			c:         topology.Constraint{Required: []string{"zone"}, Preferred: []string{"rack"}},
			running:   []topology.Placed{{Node: "node-4"}},
			wantNodes: []string{"node-4", "node-5"}, wantDomain: "zone=z1, rack=r2",
		},
		{
			name: "later members never leave the required domain: they wait, naming it",
			busy: map[string]int{"node-4": 2, "node-5": 2, "node-6": 2, "node-7": 2}, size: 1, minCount: 1,
			c:          topology.Constraint{Required: []string{"zone"}},
			running:    []topology.Placed{{Node: "node-4"}},
			wantReason: "node(s) outside zone=z1, where the gang's running members are",
		},
		{
			name: "device attribute: every device shares one clique value",
			size: 8, minCount: 8,
			c:         topology.Constraint{DeviceAttribute: "gpu.example.com/clique"},
			wantNodes: []string{"node-0", "node-2", "node-4", "node-6"}, wantDomain: "gpu.example.com/clique=0",
		},
		{
			name: "device attribute: a clique without room is skipped",
			busy: map[string]int{"node-0": 1}, size: 8, minCount: 8,
			c:         topology.Constraint{DeviceAttribute: "gpu.example.com/clique"},
			wantNodes: []string{"node-1", "node-3", "node-5", "node-7"}, wantDomain: "gpu.example.com/clique=1",
		},
		{
			name: "no node has the required label",
			size: 1, minCount: 1,
			c:          topology.Constraint{Required: []string{"example.com/block"}},
			wantReason: "node(s) lack the topology labels [example.com/block]",
		},
		{
			name: "a basic group stays in one domain too",
			size: 3, basic: true,
			c:         topology.Constraint{Required: []string{"rack"}},
			wantNodes: []string{"node-0", "node-1"}, wantDomain: "rack=r0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			in := cluster(t, zonedRacks)
			for node, n := range tc.busy {
				takeGPUs(&in, node, n)
			}
			members := gpuGang(&in, "g", tc.size, "1")
			snap := snapshot.New(in)
			unit := Unit{Members: members, MinCount: tc.minCount, Gang: !tc.basic, Topology: tc.c, Running: tc.running}
			res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), unit)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantReason != "" {
				if len(res.Assignments) != 0 || len(res.Unplaced) == 0 {
					t.Fatalf("placed %v, want nothing", placedOn(res))
				}
				if n := res.Unplaced[0].Diagnosis.Reasons[tc.wantReason]; n == 0 {
					t.Errorf("reasons %v, want %q", res.Unplaced[0].Diagnosis.Reasons, tc.wantReason)
				}
				return
			}
			var nodes []string
			for n := range placedOn(res) {
				nodes = append(nodes, n)
			}
			sort.Strings(nodes)
			if diff := cmp.Diff(tc.wantNodes, nodes); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
			if res.Domain != tc.wantDomain {
				t.Errorf("domain %q, want %q", res.Domain, tc.wantDomain)
			}
			if tc.c.DeviceAttribute != "" {
				for _, a := range res.Assignments {
					for _, c := range a.Claims {
						for _, r := range c.Status.Allocation.Devices.Results {
							if want := strings.TrimPrefix(tc.wantDomain, "gpu.example.com/clique="); parity(r.Pool) != want {
								t.Errorf("%s got %s/%s, outside clique %s", a.Pod.Name, r.Pool, r.Device, want)
							}
						}
					}
				}
			}
		})
	}
}

// parity is a zonedRacks node's clique: "0" for even nodes, "1" for odd.
func parity(node string) string {
	if (node[len(node)-1]-'0')%2 == 0 {
		return "0"
	}
	return "1"
}

// A device attribute that differs between a node's devices (a PCIe root,
// an NVLink group inside a node): a node is in several domains, and in
// each only the devices of its value are allocated.
func TestDeviceTopologyWithinANode(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	in := cluster(t, `
nodePools:
- name: node
  count: 4
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  devices:
  - driver: gpu.example.com
    count: 2
    attributes:
      link: {string: "link-{{.Index}}"}
`)
	members := gpuGang(&in, "g", 4, "1")
	snap := snapshot.New(in)
	res, err := Place(ctx, snap, dra.New(snap, dra.NewCache()), Unit{Members: members, MinCount: 4, Gang: true, Topology: topology.Constraint{DeviceAttribute: "gpu.example.com/link"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Assignments) != 4 || res.Domain != "gpu.example.com/link=link-0" {
		t.Fatalf("placed %d in %q, want 4 in link-0", len(res.Assignments), res.Domain)
	}
	for _, a := range res.Assignments {
		if d := a.Claims[0].Status.Allocation.Devices.Results[0].Device; d != "gpu-0" {
			t.Errorf("%s got %s on %s, a device of link-1", a.Pod.Name, d, a.Node)
		}
	}
}
