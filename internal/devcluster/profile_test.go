package devcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithGates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gates map[string]string
		want  []string
	}{
		{name: "no override keeps the profile's", want: []string{"--a", "--feature-gates=GenericWorkload=true"}},
		{name: "another component's override", gates: map[string]string{"kube-apiserver": "X=true"}, want: []string{"--a", "--feature-gates=GenericWorkload=true"}},
		{name: "replaced", gates: map[string]string{"kube-controller-manager": "X=false"}, want: []string{"--a", "--feature-gates=X=false"}},
		{name: "every gate at its default", gates: map[string]string{"kube-controller-manager": ""}, want: []string{"--a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &process{Name: "kube-controller-manager", Args: []string{"--a", "--feature-gates=GenericWorkload=true"}}
			if diff := cmp.Diff(tc.want, withGates(p, tc.gates).Args); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
