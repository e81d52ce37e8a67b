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
	testAnnotationValidation(t, group, []annotationCase{
		{name: "a duration", value: "30m"},
		{name: "hours and minutes", value: "1h30m"},
		{name: "no unit", value: "30", wantErr: `metadata.annotations[scheduling.lockstep.dev/min-runtime]: Invalid value: "30": not a positive duration: write a Go duration such as 30m or 2h`},
		{name: "negative", value: "-1h", wantErr: "not a positive duration"},
		{name: "zero", value: "0s", wantErr: "not a positive duration"},
		{name: "an update keeping a value made before the check", old: group("soon"), value: "soon"},
		{name: "an update to a bad value", old: group("30m"), value: "soon", wantErr: "not a positive duration"},
	})
}

// A preemption notice is a positive duration, and a checkpoint an RFC
// 3339 time: anything else is refused, naming the annotation.
func TestPodGroupNoticeAndCheckpointAreValidated(t *testing.T) {
	notice := func(v string) *lockv1.PodGroup {
		pg := builders.GangPodGroup("ml", "train", 2)
		pg.Annotations = map[string]string{lockv1.PreemptionNoticeAnnotation: v}
		return pg
	}
	testAnnotationValidation(t, notice, []annotationCase{
		{name: "notice", value: "10m"},
		{name: "notice without a unit", value: "600", wantErr: `metadata.annotations[scheduling.lockstep.dev/preemption-notice]: Invalid value: "600": not a positive duration`},
		{name: "an update keeping a notice made before the check", old: notice("x"), value: "x"},
	})
	checkpoint := func(v string) *lockv1.PodGroup {
		pg := builders.GangPodGroup("ml", "train", 2)
		pg.Annotations = map[string]string{lockv1.CheckpointedAtAnnotation: v}
		return pg
	}
	testAnnotationValidation(t, checkpoint, []annotationCase{
		{name: "checkpoint", value: "2026-12-03T10:30:00Z"},
		{name: "checkpoint with an offset", value: "2026-12-03T11:30:00+01:00"},
		{name: "checkpoint as epoch seconds", value: "1796300000", wantErr: `metadata.annotations[scheduling.lockstep.dev/checkpointed-at]: Invalid value: "1796300000": not an RFC 3339 time`},
	})
}

type annotationCase struct {
	name    string
	old     *lockv1.PodGroup
	value   string
	wantErr string
}

func testAnnotationValidation(t *testing.T, group func(string) *lockv1.PodGroup, cases []annotationCase) {
	t.Helper()
	for _, tc := range cases {
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
