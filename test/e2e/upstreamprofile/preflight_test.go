package upstreamprofile

import (
	"strings"
	"testing"
	"time"

	"github.com/lockstep-dev/lockstep/internal/preflight"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestPreflightSeesInTreeGangServed(t *testing.T) {
	h := harness.Get(t)
	r, err := preflight.Run(harness.Context(t, time.Minute), h.Client, h.Dynamic)
	if err != nil {
		t.Fatal(err)
	}
	details := map[string]string{}
	for _, c := range r.Checks {
		details[c.Name] = c.Detail
	}
	if d := details["scheduling.k8s.io/v1beta1 (in-tree gang API)"]; !strings.HasPrefix(d, "served") {
		t.Errorf("gang API on the upstream profile: want served, got %q", d)
	}
	if d := details["Job spec.scheduling"]; !strings.HasPrefix(d, "kept") {
		t.Errorf("Job field on the upstream profile: want kept, got %q", d)
	}
}
