package devcluster

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KarpenterController is Karpenter (sigs.k8s.io/karpenter, the version
// hack/integrations/karpenter pins): its core controllers with its kwok
// cloud provider, which launches a NodeClaim as a kwok Node (the cluster's
// kwok runs with --manage-all-nodes, so the Node becomes Ready), wired by
// hack/integrations/karpenter/controller, whose package comment is the
// contract of what that adds:
//
//   - Launches fail on command: the ConfigMap KarpenterCapacityConfigMap in
//     namespace "karpenter", data key "<instance-type>.<zone>" (e.g.
//     gpu-8x.zone-b) = the number of further launches there that succeed
//     (absent: unlimited). At 0 a launch fails with Karpenter's
//     InsufficientCapacityError: a Warning event InsufficientCapacityError on
//     the NodeClaim, which Karpenter deletes.
//   - The dra-kwok-driver's ResourceSlice controller runs in the same
//     process: a launched gpu-8x (gpu-4x) node gets 8 (4) devices of driver
//     gpu.example.com (KarpenterGPUDriver) in one ResourceSlice with its
//     nodeName and the Node as owner, like the static nodes' (model sim-gpu,
//     index 0…n-1, capacity memory 80Gi), published when the Node appears.
//
// Instance types (KarpenterInstanceTypes) are offered on-demand and spot in
// zone-a and zone-b. Created once it serves: KWOKNodeClass "default", the
// NodePool "gpu" (KarpenterGPUNodePool) and the DRAConfig giving GPU nodes
// their devices. Karpenter runs without leader election, webhooks (v1.14
// has none) or metrics on a fixed port, with its default feature gates and
// --ignore-dra-requests at its default, true: its own scheduling simulation
// ignores pods' ResourceClaims, so it sizes nodes for cpu, memory and pods.
var KarpenterController = Controller{
	Name: "karpenter", Module: "sigs.k8s.io/karpenter", Namespace: "karpenter",
	CRDs: []string{
		"pkg/apis/crds/karpenter.sh_nodepools.yaml",
		"pkg/apis/crds/karpenter.sh_nodeclaims.yaml",
		"pkg/apis/crds/karpenter.sh_nodeoverlays.yaml",
		"kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml",
		"dra-kwok-driver/pkg/apis/crds/test.karpenter.sh_draconfigs.yaml",
	},
	NoWebhookServer: true,
	Files:           map[string]string{"instance-types.json": karpenterInstanceTypesJSON()},
	Flags: func(p ControllerPorts) []string {
		return []string{"--disable-leader-election=true",
			"--health-probe-port=" + strconv.Itoa(p.Health), "--metrics-port=" + strconv.Itoa(p.Metrics),
			"--instance-types-file-path=" + p.File("instance-types.json"), "--capacity-namespace=" + p.Namespace}
	},
	// Lockstep asks Karpenter for gangs' missing nodes, knowing the GPU
	// instance types as Karpenter's cloud provider offers them.
	SchedulerArgs:  []string{"--karpenter", "--karpenter-instance-types={state}/" + KarpenterLockstepInstanceTypesFile},
	SchedulerFiles: map[string]string{KarpenterLockstepInstanceTypesFile: lockstepInstanceTypesYAML()},
	Objects: []PeerObject{
		{Resource: schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"},
			Manifest: "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: " + KarpenterNodeClass + "}\n"},
		{Resource: schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}, Manifest: karpenterGPUNodePoolYAML},
		{Resource: schema.GroupVersionResource{Group: "test.karpenter.sh", Version: "v1alpha1", Resource: "draconfigs"}, Manifest: karpenterDRAConfigJSON()},
	},
}

// Names of what KarpenterController creates and reads.
const (
	// KarpenterNodeClass is the KWOKNodeClass a NodeClaim's
	// spec.nodeClassRef names (group karpenter.kwok.sh, kind KWOKNodeClass).
	KarpenterNodeClass = "default"
	// KarpenterGPUNodePool is the NodePool of GPU nodes: gpu-8x or gpu-4x,
	// on-demand, in zone-a or zone-b, no taint, consolidated when empty or
	// underutilized after 10 s (all such nodes at once: budget 100%), at
	// most 2000 cpu.
	KarpenterGPUNodePool = "gpu"
	// KarpenterCapacityConfigMap limits launches per instance type and zone.
	KarpenterCapacityConfigMap = "karpenter-capacity"
	// KarpenterGPUDriver is the DRA driver of the launched GPU nodes'
	// devices (the DeviceClass of that name selects them).
	KarpenterGPUDriver = "gpu.example.com"
)

const karpenterGPUNodePoolYAML = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ` + KarpenterGPUNodePool + `}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: ` + KarpenterNodeClass + `}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [gpu-8x, gpu-4x]}
      - {key: topology.kubernetes.io/zone, operator: In, values: [zone-a, zone-b]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 10s
    budgets: [{nodes: "100%"}]
  limits:
    cpu: "2000"
`

// KarpenterInstanceType is one instance type Karpenter's kwok provider
// offers.
type KarpenterInstanceType struct {
	Name        string
	CPU, Memory string
	// GPUs are the devices of driver KarpenterGPUDriver its nodes publish.
	GPUs int
	// OnDemand is its hourly price on demand; spot costs 40% of it.
	OnDemand float64
}

// KarpenterInstanceTypes are the instance types, each offered on-demand
// and spot in KarpenterZones at the same price in both (a launch that
// allows both zones takes zone-a, unless it has no capacity left), all
// amd64 linux with 110 pods.
var KarpenterInstanceTypes = []KarpenterInstanceType{
	{Name: "cpu-4x", CPU: "4", Memory: "16Gi", OnDemand: 0.2},
	{Name: "cpu-16x", CPU: "16", Memory: "64Gi", OnDemand: 0.8},
	{Name: "cpu-64x", CPU: "64", Memory: "256Gi", OnDemand: 3.2},
	{Name: "gpu-4x", CPU: "48", Memory: "576Gi", GPUs: 4, OnDemand: 16},
	{Name: "gpu-8x", CPU: "96", Memory: "1152Gi", GPUs: 8, OnDemand: 32},
}

// KarpenterGPUResource is the extended resource a GPU instance type's
// nodes also offer, as the NVIDIA device plugin advertises their GPUs: the
// path of pods that do not use DRA (kube-scheduler beside Karpenter, which
// ignores DRA requests by default, in the benchmarks).
const KarpenterGPUResource = "nvidia.com/gpu"

// resources are a node's capacity: cpu, memory, 110 pods, and its GPUs as
// KarpenterGPUResource.
func (it KarpenterInstanceType) resources() map[string]string {
	r := map[string]string{"cpu": it.CPU, "memory": it.Memory, "pods": "110"}
	if it.GPUs > 0 {
		r[KarpenterGPUResource] = strconv.Itoa(it.GPUs)
	}
	return r
}

// KarpenterZones are the zones every instance type is offered in.
var KarpenterZones = []string{"zone-a", "zone-b"}

// karpenterInstanceTypesJSON is KarpenterInstanceTypes in kwok's
// instance-types file format (kwok/cloudprovider/instance_types.json).
func karpenterInstanceTypesJSON() string {
	type req struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	}
	type offering struct {
		Price        float64
		Available    bool
		Requirements []req
	}
	type instanceType struct {
		Name             string            `json:"name"`
		Offerings        []offering        `json:"offerings"`
		Architecture     string            `json:"architecture"`
		OperatingSystems []string          `json:"operatingSystems"`
		Resources        map[string]string `json:"resources"`
	}
	var out []instanceType
	for _, it := range KarpenterInstanceTypes {
		t := instanceType{Name: it.Name, Architecture: "amd64", OperatingSystems: []string{"linux"},
			Resources: it.resources()}
		for _, zone := range KarpenterZones {
			for _, ct := range []struct {
				name  string
				price float64
			}{{"spot", it.OnDemand * 0.4}, {"on-demand", it.OnDemand}} {
				t.Offerings = append(t.Offerings, offering{Price: ct.price, Available: true, Requirements: []req{
					{Key: "karpenter.sh/capacity-type", Operator: "In", Values: []string{ct.name}},
					{Key: "topology.kubernetes.io/zone", Operator: "In", Values: []string{zone}},
				}})
			}
		}
		out = append(out, t)
	}
	return mustJSON(out)
}

// karpenterDRAConfigJSON is the DRAConfig (dra-kwok-driver's
// test.karpenter.sh/v1alpha1) that gives each GPU instance type's nodes its
// devices, one pool and one ResourceSlice per node.
func karpenterDRAConfigJSON() string {
	var pools []any
	for _, it := range KarpenterInstanceTypes {
		if it.GPUs == 0 {
			continue
		}
		var devices []any
		for i := range it.GPUs {
			devices = append(devices, map[string]any{
				"name":       fmt.Sprintf("gpu-%d", i),
				"attributes": map[string]any{"model": map[string]any{"string": "sim-gpu"}, "index": map[string]any{"int": i}},
				"capacity":   map[string]any{"memory": map[string]any{"value": "80Gi"}},
			})
		}
		pools = append(pools, map[string]any{
			"name": it.Name,
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{
				map[string]any{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": []string{it.Name}}}}},
			"resourceSlices": []any{map[string]any{"devices": devices}},
		})
	}
	return mustJSON(map[string]any{
		"apiVersion": "test.karpenter.sh/v1alpha1", "kind": "DRAConfig",
		"metadata": map[string]any{"name": "gpu"},
		"spec":     map[string]any{"driver": KarpenterGPUDriver, "pools": pools},
	})
}

// KarpenterLockstepInstanceTypesFile is the scheduler's
// --karpenter-instance-types file in the state directory.
const KarpenterLockstepInstanceTypesFile = "karpenter-instance-types.yaml"

// lockstepInstanceTypesYAML are the GPU instance types in the words of
// Lockstep's --karpenter-instance-types (package provision): what
// Karpenter's provider offers, with the devices the DRAConfig gives their
// nodes.
func lockstepInstanceTypesYAML() string {
	var types []any
	for _, it := range KarpenterInstanceTypes {
		if it.GPUs == 0 {
			continue
		}
		types = append(types, map[string]any{
			"name": it.Name, "zones": KarpenterZones, "capacityTypes": []string{"on-demand", "spot"},
			"allocatable": it.resources(),
			"devices": []any{map[string]any{"driver": KarpenterGPUDriver, "count": it.GPUs, "nameTemplate": "gpu-{{.Index}}",
				"attributes": map[string]any{"model": map[string]any{"string": "sim-gpu"}, "index": map[string]any{"int": "{{.Index}}"}},
				"capacity":   map[string]any{"memory": "80Gi"}}},
		})
	}
	return mustJSON(map[string]any{"instanceTypes": types})
}

// mustJSON encodes a value built from literals above, which cannot fail.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
