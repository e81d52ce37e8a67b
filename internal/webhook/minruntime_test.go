package webhook

import (
	"strings"
	"testing"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A PodGroup's minimum runtime must be a positive duration; an update
// judges only a value that changed.
func TestPodGroupMinRuntimeIsValidated(t *testing.T) {
	group := func(v string) *lockv1.PodGroup {
		pg := builders.GangPodGroup("ml", "train", 2)
		pg.Annotations = map[string]string{lockv1.MinRuntimeAnnotation: v}
		return pg
	}
	for _, tc := range []struct {
		name    string
		old     *lockv1.PodGroup
		value   string
		wantErr string
	}{
		{name: "a duration", value: "30m"},
		{name: "hours and minutes", value: "1h30m"},
		{name: "no unit", value: "30", wantErr: `metadata.annotations[scheduling.lockstep.dev/min-runtime]: Invalid value: "30": not a positive duration: write a Go duration such as 30m or 2h`},
		{name: "negative", value: "-1h", wantErr: "not a positive duration"},
		{name: "zero", value: "0s", wantErr: "not a positive duration"},
		{name: "an update keeping a value made before the check", old: group("soon"), value: "soon"},
		{name: "an update to a bad value", old: group("30m"), value: "soon", wantErr: "not a positive duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := validateTopologyAnnotations(tc.old, group(tc.value))
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.wantErr)):
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}
