package provision

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const instanceTypes = `
instanceTypes:
- name: gpu-8x
  zones: [zone-a, zone-b]
  allocatable: {cpu: "96", memory: 1152Gi, pods: "110"}
  devices: [{driver: gpu.example.com, count: 8}]
- name: gpu-4x
  zones: [zone-a, zone-b]
  capacityTypes: [spot, on-demand]
  allocatable: {cpu: "48", memory: 576Gi, pods: "110"}
  devices: [{driver: gpu.example.com, count: 4}]
`

func nodePool(t *testing.T, doc string) *NodePool {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	np, err := ReadNodePool(u)
	if err != nil {
		t.Fatal(err)
	}
	return np
}

const gpuPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu, uid: pool-uid, annotations: {karpenter.sh/nodepool-hash: "123", karpenter.sh/nodepool-hash-version: v3}}
spec:
  template:
    metadata: {labels: {team: ml}}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [gpu-8x, gpu-4x]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
      expireAfter: 720h
  limits: {cpu: "1000"}
status:
  resources: {cpu: "800"}
`

// devicesNeeded is a fake decision: the unit fits when the nodes added
// bring at least need devices of one zone.
func devicesNeeded(need int, tried *[]string) Fits {
	return func(nodes []*corev1.Node, slices []*resourcev1.ResourceSlice) (bool, string) {
		n := 0
		for _, s := range slices {
			n += len(s.Spec.Devices)
		}
		zone := ""
		if len(nodes) > 0 {
			zone = nodes[0].Labels[corev1.LabelTopologyZone] + "/" + nodes[0].Labels[corev1.LabelInstanceTypeStable]
		}
		*tried = append(*tried, fmt.Sprintf("%s×%d", zone, len(nodes)))
		if n >= need {
			return true, ""
		}
		return false, fmt.Sprintf("%d devices, %d needed", n, need)
	}
}

// Plan proposes the fewest nodes of one offering, in NodePool order, and
// never more than the NodePool's limits leave: the limit is named instead.
func TestPlan(t *testing.T) {
	types, err := ParseInstanceTypes([]byte(instanceTypes))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		pool     string
		need     int
		excluded map[string]bool
		want     string
		why      string
	}{{
		name: "12 GPUs: two gpu-8x nodes, the first offering",
		pool: gpuPool, need: 12,
		want: "2 nodes of gpu-8x in zone-a (on-demand) from NodePool gpu",
	}, {
		name: "4 GPUs: one gpu-8x beats nothing fewer",
		pool: gpuPool, need: 4,
		want: "1 node of gpu-8x in zone-a (on-demand) from NodePool gpu",
	}, {
		name: "zone-a's gpu-8x failed: zone-b",
		pool: gpuPool, need: 12, excluded: map[string]bool{"gpu/gpu-8x/zone-a/on-demand": true},
		want: "2 nodes of gpu-8x in zone-b (on-demand) from NodePool gpu",
	}, {
		name: "beyond the limit: 3 nodes of 96 cpu leave no room in 200",
		pool: gpuPool, need: 20,
		why: "gpu-8x in zone-a (on-demand): would fit on 3 new nodes, beyond NodePool gpu's limits (cpu: 3 nodes need 288, its limit leaves 200 of 1k)",
	}, {
		name: "more than any node count makes fit",
		pool: gpuPool, need: 1000,
		why: "gpu-8x in zone-a (on-demand) from NodePool gpu: 32 devices, 1000 needed",
	}, {
		name: "a static NodePool makes no NodeClaim",
		pool: strings.Replace(gpuPool, "  limits:", "  replicas: 4\n  limits:", 1), need: 4,
		why: "no NodePool offers an instance type Lockstep knows of (karpenter.instanceTypes)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var tried []string
			res := Plan(Offerings([]*NodePool{nodePool(t, tc.pool)}, types, tc.excluded), 4, devicesNeeded(tc.need, &tried))
			got := ""
			if res.Request != nil {
				got = res.Request.String()
			}
			if got != tc.want {
				t.Errorf("request %q, want %q (tried %v)", got, tc.want, tried)
			}
			if tc.why != "" && (len(res.Why) == 0 || res.Why[0] != tc.why) {
				t.Errorf("why %q, want first %q", res.Why, tc.why)
			}
		})
	}
}

// The NodeClaims of a request are the NodePool's, narrowed to the
// offering, named after the request, held from disruption, marked as
// Lockstep's.
func TestNodeClaims(t *testing.T) {
	types, err := ParseInstanceTypes([]byte(instanceTypes))
	if err != nil {
		t.Fatal(err)
	}
	np := nodePool(t, gpuPool)
	ncs, err := NodeClaims(Request{Offering: Offering{NodePool: np, InstanceType: &types[0], Zone: "zone-b", CapacityType: "on-demand"}, Count: 2}, "ml/train", "abc-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ncs) != 2 {
		t.Fatalf("%d NodeClaims, want 2", len(ncs))
	}
	got, err := yaml.Marshal(ncs[1].Object)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  annotations:
    karpenter.sh/do-not-disrupt: "true"
    karpenter.sh/nodepool-hash: "123"
    karpenter.sh/nodepool-hash-version: v3
    scheduling.lockstep.dev/provision-count: "2"
    scheduling.lockstep.dev/provisioned-for: ml/train
  labels:
    app.kubernetes.io/created-by: lockstep
    karpenter.sh/nodepool: gpu
    scheduling.lockstep.dev/provision-request: abc-1
    scheduling.lockstep.dev/provisioned-for: ` + UnitHash("ml/train") + `
    team: ml
  name: ` + NodeClaimName("gpu", "abc-1", 1) + `
  ownerReferences:
  - apiVersion: karpenter.sh/v1
    blockOwnerDeletion: true
    kind: NodePool
    name: gpu
    uid: pool-uid
spec:
  expireAfter: 720h
  nodeClassRef:
    group: karpenter.kwok.sh
    kind: KWOKNodeClass
    name: default
  requirements:
  - key: karpenter.sh/capacity-type
    operator: In
    values:
    - on-demand
  - key: karpenter.sh/nodepool
    operator: In
    values:
    - gpu
  - key: node.kubernetes.io/instance-type
    operator: In
    values:
    - gpu-8x
  - key: topology.kubernetes.io/zone
    operator: In
    values:
    - zone-b
  taints:
  - effect: NoSchedule
    key: nvidia.com/gpu
  - effect: NoSchedule
    key: scheduling.lockstep.dev/reserved-for
    value: ` + UnitHash("ml/train") + `
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("NodeClaim (-want,+got):\n%s", diff)
	}
}

// Instance types are validated as a cluster spec's pools are.
func TestParseInstanceTypesRefusesBadInput(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"instanceTypes: [{name: a, allocatable: {pods: '1'}}]", "instanceTypes[0].zones: Required value"},
		{"instanceTypes: [{name: a, zones: [z]}]", "instanceTypes[0].allocatable.pods: Required value"},
		{"instanceTypes: [{name: a, zones: [z], allocatable: {pods: '1'}}, {name: a, zones: [z], allocatable: {pods: '1'}}]", `instanceTypes[1].name: Duplicate value: "a"`},
		{"instanceTypes: [{name: a, zones: [z], allocatable: {pods: '1'}, devices: [{driver: gpu.example.com, count: -1}]}]", "instanceTypes[0].devices"},
		{"instanceTypes: [{name: a, zone: [z]}]", `unknown field "zone"`},
	} {
		_, err := ParseInstanceTypes([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.doc, err, tc.want)
		}
	}
	_ = resource.MustParse
}

// fewest starts at its bound: a unit that needs 5 nodes is found in one
// decision from a bound of 5, and from a bound of 4 with those the search
// needs; a bound beyond the limit tries nothing.
func TestFewestStartsAtItsBound(t *testing.T) {
	for _, tc := range []struct {
		from, limit int
		want        int
		wantTries   []int
	}{
		{from: 1, limit: 100, want: 5, wantTries: []int{1, 2, 4, 8, 6, 5}},
		{from: 4, limit: 100, want: 5, wantTries: []int{4, 8, 6, 5}},
		{from: 5, limit: 100, want: 5, wantTries: []int{5}},
		{from: 0, limit: 3, wantTries: []int{1, 2, 3}},
		{from: 7, limit: 6},
	} {
		t.Run(fmt.Sprintf("from %d limit %d", tc.from, tc.limit), func(t *testing.T) {
			var tries []int
			render := func(n int) ([]*corev1.Node, []*resourcev1.ResourceSlice, error) {
				tries = append(tries, n)
				return make([]*corev1.Node, n), nil, nil
			}
			got, _ := fewest(render, tc.from, tc.limit, func(nodes []*corev1.Node, _ []*resourcev1.ResourceSlice) (bool, string) {
				return len(nodes) >= 5, "fewer than 5"
			})
			if got != tc.want || !slices.Equal(tries, tc.wantTries) {
				t.Errorf("fewest = %d after %v; want %d after %v", got, tries, tc.want, tc.wantTries)
			}
		})
	}
}
