package webhook

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// TestMetricsOptions checks where the webhook serves its metrics, and that
// the profiles are served only when asked for and only beside metrics.
func TestMetricsOptions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         Options
		wantBind  string
		wantPaths []string
	}{
		{name: "default address", o: Options{MetricsAddr: ":8085"}, wantBind: ":8085"},
		{name: "empty disables", o: Options{}, wantBind: "0"},
		{name: "0 disables", o: Options{MetricsAddr: "0"}, wantBind: "0"},
		{name: "profiling", o: Options{MetricsAddr: "127.0.0.1:9000", Profiling: true}, wantBind: "127.0.0.1:9000",
			wantPaths: []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile", "/debug/pprof/symbol", "/debug/pprof/trace"}},
		{name: "profiling without metrics serves nothing", o: Options{MetricsAddr: "0", Profiling: true}, wantBind: "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.o.metricsOptions()
			if got.BindAddress != tc.wantBind {
				t.Errorf("BindAddress = %q, want %q", got.BindAddress, tc.wantBind)
			}
			paths := sets.List(sets.KeySet(got.ExtraHandlers))
			if want := slices.Sorted(slices.Values(tc.wantPaths)); !slices.Equal(paths, want) {
				t.Errorf("extra handlers = %v, want %v", paths, want)
			}
		})
	}
}
