package preflight

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestOwnedWorkload: the probe's wait for kube-controller-manager's
// Workload tells "none came" from "could not look", and a list that fails
// for a while (the client's rate limiter at the deadline, an API server
// restart) is neither.
func TestOwnedWorkload(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "probe", Name: "lockstep-preflight-x", UID: "job-uid"}}
	owned := &unstructured.Unstructured{}
	owned.SetAPIVersion("scheduling.k8s.io/v1beta1")
	owned.SetKind("Workload")
	owned.SetNamespace("probe")
	owned.SetName("lockstep-preflight-x-workload")
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}})
	other := owned.DeepCopy()
	other.SetName("someone-elses")
	other.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "other", UID: "other-uid", Controller: ptr.To(true)}})
	transient := errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	forbidden := apierrors.NewForbidden(workloads.GroupResource(), "", errors.New("no"))

	for _, tc := range []struct {
		name     string
		objects  []runtime.Object
		failures []error // what the first lists return, in order; later lists succeed
		always   error   // what every list returns, when set
		wantName string
		wantErr  error
	}{
		{name: "the Job's Workload is found", objects: []runtime.Object{other, owned}, wantName: owned.GetName()},
		{name: "found after lists that failed for a while", objects: []runtime.Object{owned}, failures: []error{transient, transient}, wantName: owned.GetName()},
		{name: "none came: another Job's Workload is not the probe's", objects: []runtime.Object{other}},
		{name: "none came, though some lists failed", failures: []error{transient}},
		{name: "never listed: the last failure is the answer", always: transient, wantErr: transient},
		{name: "a refusal ends the wait at once", always: forbidden, wantErr: forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{workloads: "WorkloadList"}, tc.objects...)
			calls := 0
			dyn.PrependReactor("list", "workloads", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls++
				if tc.always != nil {
					return true, nil, tc.always
				}
				if calls <= len(tc.failures) {
					return true, nil, tc.failures[calls-1]
				}
				return false, nil, nil
			})
			start := time.Now()
			name, err := ownedWorkload(context.Background(), dyn, job, 2*time.Second)
			if name != tc.wantName || fmt.Sprint(err) != fmt.Sprint(tc.wantErr) {
				t.Errorf("ownedWorkload = %q, %v; want %q, %v", name, err, tc.wantName, tc.wantErr)
			}
			if tc.always == forbidden && (calls != 1 || time.Since(start) > time.Second) {
				t.Errorf("a refusal must end the wait at its first list: %d lists in %s", calls, time.Since(start))
			}
		})
	}
}
