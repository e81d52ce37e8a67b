package scheduler

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A write naming a pod's uid that fails because the pod is gone or was
// replaced under the same name is told apart from a write that failed.
func TestPodReplaced(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	podKind := schema.GroupKind{Kind: "Pod"}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"gone": {err: apierrors.NewNotFound(pods, "w-0"), want: true},
		"delete's uid precondition failed": {
			err: apierrors.NewConflict(pods, "w-0", errors.New("Precondition failed: UID in precondition: a, UID in object meta: b")), want: true,
		},
		"a patch naming another uid": {
			err: apierrors.NewInvalid(podKind, "w-0", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "a", "field is immutable")}), want: true,
		},
		"invalid for another reason": {
			err: apierrors.NewInvalid(podKind, "w-0", field.ErrorList{field.Invalid(field.NewPath("status", "phase"), "Done", "unsupported")}),
		},
		"refused":   {err: apierrors.NewForbidden(pods, "w-0", errors.New("no"))},
		"timed out": {err: apierrors.NewTimeoutError("slow", 1)},
		"no error":  {},
	} {
		if got := podReplaced(tc.err); got != tc.want {
			t.Errorf("%s: podReplaced(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}
