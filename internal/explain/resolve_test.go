package explain

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

func object(apiVersion, kind, name string, uid types.UID, controller *metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("ml")
	u.SetName(name)
	u.SetUID(uid)
	if controller != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*controller})
	}
	return u
}

// A TrainJob resolves to the gang of the JobSet of its name that it
// controls; never to a JobSet that is not its own, and a missing one is
// said to be missing.
func TestExplainTrainJobResolvesItsJobSet(t *testing.T) {
	ctrl := func(uid types.UID) *metav1.OwnerReference {
		yes := true
		return &metav1.OwnerReference{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "llama", UID: uid, Controller: &yes}
	}
	trainJob := object("trainer.kubeflow.org/v1alpha1", "TrainJob", "llama", "tj", nil)
	jobSet := object("jobset.x-k8s.io/v1alpha2", "JobSet", "llama", "js", ctrl("tj"))
	jobSet.Object["spec"] = map[string]any{"replicatedJobs": []any{map[string]any{
		"name": "node", "replicas": int64(1), "template": map[string]any{"spec": map[string]any{
			"parallelism": int64(2), "completions": int64(2), "template": map[string]any{"spec": map[string]any{"schedulerName": lockv1.SchedulerName}},
		}},
	}}}
	for name, tc := range map[string]struct {
		objs    []runtime.Object
		wantErr string
		unit    string
	}{
		"its JobSet's gang": {
			objs: []runtime.Object{trainJob, jobSet},
			unit: "PodGroup ml/llama",
		},
		"no JobSet yet": {
			objs:    []runtime.Object{trainJob},
			wantErr: "TrainJob ml/llama runs as JobSet llama, which its controller has not created yet",
		},
		"a JobSet of that name that is another's": {
			objs:    []runtime.Object{trainJob, object("jobset.x-k8s.io/v1alpha2", "JobSet", "llama", "js", ctrl("old-tj"))},
			wantErr: "JobSet ml/llama is not TrainJob ml/llama's",
		},
		"no TrainJob": {
			objs:    []runtime.Object{object("jobset.x-k8s.io/v1alpha2", "JobSet", "llama", "js", nil)},
			wantErr: "TrainJob ml/llama: ",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}: "TrainJobList",
				{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}:        "JobSetList",
			}, tc.objs...)
			st := &state{groups: map[string]*lockv1.PodGroup{"ml/llama": {ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama"}}}}
			u, err := resolve(context.Background(), dyn, st, Target{Kind: "trainjob", Namespace: "ml", Name: "llama"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.label != tc.unit {
				t.Errorf("unit %q, want %q", u.label, tc.unit)
			}
		})
	}
}
