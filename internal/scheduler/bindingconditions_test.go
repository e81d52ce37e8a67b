package scheduler

import (
	"errors"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBindingConditionsMet(t *testing.T) {
	claim := func(conds ...metav1.Condition) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "r", Driver: "d", Pool: "p", Device: "other"},
			{Request: "r", Driver: "d", Pool: "p", Device: "fabric-0", BindingConditions: []string{"Attached", "Ready"}, BindingFailureConditions: []string{"Failed"}},
		}}}
		if conds != nil {
			c.Status.Devices = []resourcev1.AllocatedDeviceStatus{
				{Driver: "d", Pool: "p", Device: "other", Conditions: []metav1.Condition{{Type: "Failed", Status: metav1.ConditionTrue}}},
				{Driver: "d", Pool: "p", Device: "fabric-0", Conditions: conds},
			}
		}
		return c
	}
	cond := func(typ string, st metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st}
	}
	tests := []struct {
		name      string
		claim     *resourcev1.ResourceClaim
		wantReady bool
		wantErr   bool
	}{
		{name: "no device status yet", claim: claim()},
		{name: "one of two conditions", claim: claim(cond("Attached", metav1.ConditionTrue))},
		{name: "a condition False", claim: claim(cond("Attached", metav1.ConditionTrue), cond("Ready", metav1.ConditionFalse))},
		{name: "all True", claim: claim(cond("Attached", metav1.ConditionTrue), cond("Ready", metav1.ConditionTrue)), wantReady: true},
		{name: "failure condition True", claim: claim(cond("Attached", metav1.ConditionTrue), cond("Failed", metav1.ConditionTrue)), wantErr: true},
		{name: "failure condition False", claim: claim(cond("Attached", metav1.ConditionTrue), cond("Ready", metav1.ConditionTrue), cond("Failed", metav1.ConditionFalse)), wantReady: true},
		{name: "deallocated", claim: &resourcev1.ResourceClaim{}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ready, err := bindingConditionsMet(tc.claim)
			if ready != tc.wantReady || (err != nil) != tc.wantErr {
				t.Errorf("ready %v, err %v; want ready %v, error %v", ready, err, tc.wantReady, tc.wantErr)
			}
			if err != nil && !errors.Is(err, errBindingConditions) {
				t.Errorf("error %v is not errBindingConditions", err)
			}
		})
	}
}
