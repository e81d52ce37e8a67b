package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// instanceType offers name on-demand (price) and spot (40% of it) in
// zone-a and zone-b, as the harness's instance types file does.
func instanceType(name string, price float64) *cloudprovider.InstanceType {
	it := &cloudprovider.InstanceType{Name: name, Requirements: scheduling.NewRequirements(
		scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, name))}
	for _, zone := range []string{"zone-a", "zone-b"} {
		for ct, p := range map[string]float64{"on-demand": price, "spot": price * 0.4} {
			it.Offerings = append(it.Offerings, &cloudprovider.Offering{Price: p, Available: true, Requirements: scheduling.NewRequirements(
				scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zone),
				scheduling.NewRequirement(v1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, ct))})
		}
	}
	return it
}

func nodeClaim(reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{Spec: v1.NodeClaimSpec{Requirements: reqs}}
}

func in(key string, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func TestChoose(t *testing.T) {
	its := []*cloudprovider.InstanceType{instanceType("gpu-4x", 16), instanceType("gpu-8x", 32)}
	onDemand := in(v1.CapacityTypeLabelKey, "on-demand")
	both := in(corev1.LabelInstanceTypeStable, "gpu-4x", "gpu-8x")
	for name, tc := range map[string]struct {
		nc          *v1.NodeClaim
		left        map[string]int
		want        string // key of the chosen offering, "" for none
		wantBlocked int
	}{
		"no limits: cheapest type, first zone": {nc: nodeClaim(both, onDemand), want: "gpu-4x.zone-a"},
		"a zone at 0 moves the launch":         {nc: nodeClaim(both, onDemand), left: map[string]int{"gpu-4x.zone-a": 0}, want: "gpu-4x.zone-b", wantBlocked: 1},
		"a type at 0 in both zones moves it to the next type": {nc: nodeClaim(both, onDemand),
			left: map[string]int{"gpu-4x.zone-a": 0, "gpu-4x.zone-b": 0}, want: "gpu-8x.zone-a", wantBlocked: 2},
		"capacity left is taken": {nc: nodeClaim(in(corev1.LabelInstanceTypeStable, "gpu-8x"), in(corev1.LabelTopologyZone, "zone-b"), onDemand),
			left: map[string]int{"gpu-8x.zone-b": 1}, want: "gpu-8x.zone-b"},
		"everything allowed at 0: none, and which": {nc: nodeClaim(in(corev1.LabelInstanceTypeStable, "gpu-8x"), in(corev1.LabelTopologyZone, "zone-b")),
			left: map[string]int{"gpu-8x.zone-b": 0}, wantBlocked: 1},
		"an unknown type: none, nothing blocked": {nc: nodeClaim(in(corev1.LabelInstanceTypeStable, "tpu"))},
	} {
		t.Run(name, func(t *testing.T) {
			got, blocked := choose(its, tc.nc, tc.left)
			key := ""
			if got != nil {
				key = got.key()
			}
			if key != tc.want || len(blocked) != tc.wantBlocked {
				t.Errorf("choose = %q, blocked %v; want %q, %d blocked", key, blocked, tc.want, tc.wantBlocked)
			}
		})
	}
}

func TestPinNarrowsToTheOffering(t *testing.T) {
	nc := nodeClaim(in(corev1.LabelInstanceTypeStable, "gpu-4x", "gpu-8x"), in(corev1.LabelTopologyZone, "zone-a", "zone-b"), in("example.com/team", "a"))
	got := pin(nc, offering{instanceType: "gpu-8x", zone: "zone-b", capacityType: "spot"})
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(got.Spec.Requirements...)
	for key, want := range map[string]string{corev1.LabelInstanceTypeStable: "gpu-8x", corev1.LabelTopologyZone: "zone-b", v1.CapacityTypeLabelKey: "spot", "example.com/team": "a"} {
		if r := reqs.Get(key); r.Len() != 1 || !r.Has(want) {
			t.Errorf("%s: %v, want only %s", key, r.Values(), want)
		}
	}
	if len(nc.Spec.Requirements) != 3 {
		t.Errorf("pin changed its argument: %v", nc.Spec.Requirements)
	}
}
