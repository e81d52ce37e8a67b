package podgroup

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

func TestMinRuntimes(t *testing.T) {
	got, err := ParseMinRuntimes(" research=30m, batch=2h ,")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]time.Duration{"research": 30 * time.Minute, "batch": 2 * time.Hour}, got); diff != "" {
		t.Errorf("ParseMinRuntimes (-want,+got):\n%s", diff)
	}
	for _, bad := range []string{"research", "=30m", "research=soon", "research=0s"} {
		if _, err := ParseMinRuntimes(bad); err == nil {
			t.Errorf("ParseMinRuntimes(%q) accepted", bad)
		}
	}
	for ann, want := range map[string]time.Duration{"45m": 45 * time.Minute, "soon": 0, "": 0} {
		a := map[string]string{lockv1.MinRuntimeAnnotation: ann}
		d, set := MinRuntime(a)
		if d != want || set != (want > 0) {
			t.Errorf("MinRuntime(%q) = %v, %v; want %v", ann, d, set, want)
		}
	}
	if _, set := MinRuntime(nil); set {
		t.Error("MinRuntime of no annotation is set")
	}
}
