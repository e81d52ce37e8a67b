package integrity

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// TestOwnerThroughIntegrations: a group's owner is the object of its
// controller's kind that the integration set resolves.
func TestOwnerThroughIntegrations(t *testing.T) {
	job := builders.IndexedJob("ml", "train", 4, builders.MakePod().Member("train").Obj())
	job.UID = "job-uid"
	suspended := job.DeepCopy()
	suspended.Spec.Suspend = ptr.To(true)
	ctl := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	cases := map[string]struct {
		refs []metav1.OwnerReference
		objs []client.Object
		want *Owner
	}{
		"a Job":                         {refs: ctl("batch/v1", "Job", "train", "job-uid"), objs: []client.Object{job}, want: &Owner{Name: "Job ml/train", Size: 4}},
		"a suspended Job":               {refs: ctl("batch/v1", "Job", "train", "job-uid"), objs: []client.Object{suspended}, want: &Owner{Name: "Job ml/train", Stopped: "suspended", Suspended: true, Size: 4}},
		"a Job that is gone":            {refs: ctl("batch/v1", "Job", "train", "job-uid"), want: &Owner{Name: "Job ml/train", Stopped: "deleted", Failed: true}},
		"a Job of that name, recreated": {refs: ctl("batch/v1", "Job", "train", "old-uid"), objs: []client.Object{job}, want: &Owner{Name: "Job ml/train", Stopped: "deleted", Failed: true}},
		"a kind no integration runs":    {refs: ctl("apps/v1", "ReplicaSet", "train", "rs-uid")},
		"another version of the kind":   {refs: ctl("batch/v2", "Job", "train", "job-uid"), objs: []client.Object{job}},
		"no controller (bare pods)":     {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pg := builders.GangPodGroup("ml", "train", 4)
			pg.OwnerReferences = tc.refs
			r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(tc.objs...).Build(), Integrations: integrations.All()}
			got, err := r.owner(context.Background(), pg)
			if err != nil {
				t.Fatal(err)
			}
			if got != nil {
				got.Wants = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("owner (-want,+got):\n%s", diff)
			}
		})
	}
}
