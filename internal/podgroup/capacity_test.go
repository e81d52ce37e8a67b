package podgroup

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

func TestNodeCapacityType(t *testing.T) {
	for labels, want := range map[string]CapacityType{
		"":                                       OnDemand,
		LabelKarpenterCapacityType + "=spot":     Spot,
		LabelKarpenterCapacityType + "=reserved": Reserved,
		LabelKarpenterCapacityType + "=on-demand": OnDemand,
		LabelEKSCapacityType + "=SPOT":            Spot,
		LabelEKSCapacityType + "=ON_DEMAND":       OnDemand,
		LabelEKSCapacityType + "=CAPACITY_BLOCK":  Reserved,
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if k, v, ok := strings.Cut(labels, "="); ok {
			n.Labels[k] = v
		}
		if got := NodeCapacityType(n); got != want {
			t.Errorf("node labelled %q: %s, want %s", labels, got, want)
		}
	}
}

func TestGroupCapacityTypes(t *testing.T) {
	pg := &lockv1.PodGroup{}
	if got := GroupCapacityTypes(pg, DefaultCapacityTypes); got != nil {
		t.Errorf("a basic group without the annotation: %s, want any", got)
	}
	pg.Spec.SchedulingPolicy.Gang = &lockv1.GangSchedulingPolicy{MinCount: 2}
	if got := GroupCapacityTypes(pg, DefaultCapacityTypes).String(); got != "on-demand,reserved" {
		t.Errorf("a gang without the annotation: %s, want the default", got)
	}
	pg.Annotations = map[string]string{lockv1.CapacityTypesAnnotation: " spot, on-demand"}
	if got := GroupCapacityTypes(pg, DefaultCapacityTypes).String(); got != "spot,on-demand" {
		t.Errorf("annotated: %s", got)
	}
	if GroupCapacityTypes(nil, DefaultCapacityTypes) != nil {
		t.Error("a lone pod has a capacity policy")
	}
	for _, bad := range []string{"", "cheap", "spot,spot", "spot,,on-demand"} {
		if _, err := ParseCapacityTypes(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
