package job

import (
	"context"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// In a namespace being deleted, exactly the Jobs whose per-index backoff
// Lockstep's admission set are deleted (their pods would otherwise hold the
// namespace for ever); a Job the user made per-index, one admission gave
// only the rule, and every Job of a namespace that stays are left alone.
func TestReleaserDeletesOnlyDefaultedPerIndexJobsOfATerminatingNamespace(t *testing.T) {
	job := func(ns, name, defaulted string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + name)}}
		if defaulted != "" {
			j.Annotations = map[string]string{RestartBudgetDefaultedAnnotation: defaulted}
		}
		return j
	}
	now := metav1.Now()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "staying"}},
		job("going", "defaulted", "podFailurePolicy,podReplacementPolicy,backoffLimitPerIndex"),
		job("going", "rule-only", "podFailurePolicy,podReplacementPolicy"),
		job("going", "users-own", ""),
		job("staying", "defaulted", "podFailurePolicy,podReplacementPolicy,backoffLimitPerIndex"),
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	r := &Releaser{Client: c}
	for _, ns := range []string{"going", "staying", "gone"} {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}}); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	list := &batchv1.JobList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, j := range list.Items {
		left = append(left, j.Namespace+"/"+j.Name)
	}
	sort.Strings(left)
	if d := cmp.Diff([]string{"going/rule-only", "going/users-own", "staying/defaulted"}, left); d != "" {
		t.Errorf("Jobs left (-want,+got):\n%s", d)
	}
}
