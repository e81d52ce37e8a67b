package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKubernetesBased(t *testing.T) {
	graph := `example.com/main google.golang.org/grpc@v1.82.1
example.com/main sigs.k8s.io/jobset@v0.12.0
google.golang.org/grpc@v1.82.1 go.opentelemetry.io/contrib/detectors/gcp@v1.43.0
google.golang.org/grpc@v1.82.1 golang.org/x/net@v0.59.0
sigs.k8s.io/jobset@v0.12.0 k8s.io/client-go@v0.36.0
sigs.k8s.io/jobset@v0.12.0 k8s.io/klog/v2@v2.140.0
k8s.io/client-go@v0.36.0 golang.org/x/net@v0.59.0
go.opentelemetry.io/contrib/detectors/gcp@v1.43.0 go.opentelemetry.io/otel@v1.43.0
github.com/example/logger@v1.0.0 k8s.io/klog/v2@v2.140.0
`
	got := slices.Sorted(maps.Keys(kubernetesBased(graph)))
	want := []string{
		"example.com/main",                          // requires JobSet
		"go.opentelemetry.io/contrib/detectors/gcp", // kept with the Kubernetes libraries
		"k8s.io/client-go",
		"sigs.k8s.io/jobset", // requires client-go
		// not gRPC, which only requires OpenTelemetry's contrib, nor a module
		// that only requires klog, a foundation
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Kubernetes-based modules (-want +got):\n%s", diff)
	}
}

func TestPlan(t *testing.T) {
	mod := func(path, version string) module { return module{Path: path, Version: version, Required: version} }
	replaced := func(path, required, version string) module {
		return module{Path: path, Required: required, Version: version, Replace: &module{Path: path, Version: version}}
	}
	units := func(us ...unit) []unit { return us }
	tests := []struct {
		name  string
		units []unit
		want  map[string][]string
	}{
		{
			name: "a foundation is raised to the highest in use",
			units: units(
				unit{dir: ".", modules: map[string]module{"google.golang.org/grpc": mod("google.golang.org/grpc", "v1.82.1")}},
				unit{dir: "hack/k8s", modules: map[string]module{"google.golang.org/grpc": mod("google.golang.org/grpc", "v1.83.2")}},
			),
			want: map[string][]string{".": {"google.golang.org/grpc@v1.83.2"}},
		},
		{
			name: "a Kubernetes library only to the highest patch of its minor",
			units: units(
				unit{dir: ".", modules: map[string]module{"k8s.io/client-go": mod("k8s.io/client-go", "v0.37.2")},
					kubernetesBased: map[string]bool{"k8s.io/client-go": true}},
				unit{dir: "hack/integrations/a", modules: map[string]module{"k8s.io/client-go": mod("k8s.io/client-go", "v0.34.1")},
					kubernetesBased: map[string]bool{"k8s.io/client-go": true}},
				unit{dir: "hack/integrations/b", modules: map[string]module{"k8s.io/client-go": mod("k8s.io/client-go", "v0.34.3")},
					kubernetesBased: map[string]bool{"k8s.io/client-go": true}},
			),
			want: map[string][]string{"hack/integrations/a": {"k8s.io/client-go@v0.34.3"}},
		},
		{
			name: "a Kubernetes library with no releases to the highest among units on the same Kubernetes minor",
			units: units(
				unit{dir: "hack/integrations/a", modules: map[string]module{
					"k8s.io/apimachinery": mod("k8s.io/apimachinery", "v0.34.1"),
					"k8s.io/kube-openapi": mod("k8s.io/kube-openapi", "v0.0.0-20250814151709-d7b6acb124c3"),
				}, kubernetesBased: map[string]bool{"k8s.io/apimachinery": true, "k8s.io/kube-openapi": true}},
				unit{dir: "hack/integrations/b", modules: map[string]module{
					"k8s.io/apimachinery": mod("k8s.io/apimachinery", "v0.34.1"),
					"k8s.io/kube-openapi": mod("k8s.io/kube-openapi", "v0.0.0-20250910181357-589584f1c912"),
				}, kubernetesBased: map[string]bool{"k8s.io/apimachinery": true, "k8s.io/kube-openapi": true}},
				unit{dir: "hack/integrations/c", modules: map[string]module{
					"k8s.io/apimachinery": mod("k8s.io/apimachinery", "v0.36.2"),
					"k8s.io/kube-openapi": mod("k8s.io/kube-openapi", "v0.0.0-20260317180543-43fb72c5454a"),
				}, kubernetesBased: map[string]bool{"k8s.io/apimachinery": true, "k8s.io/kube-openapi": true}},
			),
			want: map[string][]string{"hack/integrations/a": {"k8s.io/kube-openapi@v0.0.0-20250910181357-589584f1c912"}},
		},
		{
			name: "a unit on another's stack takes its Kubernetes libraries",
			units: units(
				unit{dir: ".", modules: map[string]module{"k8s.io/client-go": mod("k8s.io/client-go", "v0.37.2")},
					kubernetesBased: map[string]bool{"k8s.io/client-go": true}},
				unit{dir: "hack/integrations/karpenter", modules: map[string]module{"k8s.io/client-go": mod("k8s.io/client-go", "v0.35.3")},
					kubernetesBased: map[string]bool{"k8s.io/client-go": true}},
			),
			want: map[string][]string{"hack/integrations/karpenter": {"k8s.io/client-go@v0.37.2"}},
		},
		{
			name: "and its version of a peer's API built on Kubernetes, which a unit on no stack keeps at its minor",
			units: units(
				unit{dir: "hack/integrations/trainer", modules: map[string]module{
					"k8s.io/api":                     mod("k8s.io/api", "v0.36.2"),
					"github.com/kubeflow/trainer/v2": mod("github.com/kubeflow/trainer/v2", "v2.3.0"),
				}, kubernetesBased: map[string]bool{"k8s.io/api": true, "github.com/kubeflow/trainer/v2": true}},
				unit{dir: "hack/integrations/kueue", modules: map[string]module{
					"k8s.io/api":                     mod("k8s.io/api", "v0.35.3"),
					"github.com/kubeflow/trainer/v2": mod("github.com/kubeflow/trainer/v2", "v2.2.0"),
					"sigs.k8s.io/lws":                mod("sigs.k8s.io/lws", "v0.8.0"),
				}, kubernetesBased: map[string]bool{"k8s.io/api": true, "github.com/kubeflow/trainer/v2": true, "sigs.k8s.io/lws": true}},
				unit{dir: "hack/integrations/other", modules: map[string]module{
					"github.com/kubeflow/trainer/v2": mod("github.com/kubeflow/trainer/v2", "v2.2.0"),
				}, kubernetesBased: map[string]bool{"github.com/kubeflow/trainer/v2": true}},
			),
			want: map[string][]string{"hack/integrations/kueue": {"github.com/kubeflow/trainer/v2@v2.3.0", "k8s.io/api@v0.36.2"}},
		},
		{
			name: "but not its version of the controller the unit builds",
			units: units(
				unit{dir: ".", modules: map[string]module{
					"k8s.io/client-go":   mod("k8s.io/client-go", "v0.37.2"),
					"sigs.k8s.io/jobset": mod("sigs.k8s.io/jobset", "v0.13.0"),
				}, kubernetesBased: map[string]bool{"k8s.io/client-go": true, "sigs.k8s.io/jobset": true}},
				unit{dir: "hack/integrations/jobset", modules: map[string]module{
					"k8s.io/client-go":   mod("k8s.io/client-go", "v0.36.2"),
					"sigs.k8s.io/jobset": mod("sigs.k8s.io/jobset", "v0.12.0"),
				}, kubernetesBased: map[string]bool{"k8s.io/client-go": true, "sigs.k8s.io/jobset": true},
					builds: map[string]bool{"sigs.k8s.io/jobset": true}},
			),
			want: map[string][]string{"hack/integrations/jobset": {"k8s.io/client-go@v0.37.2"}},
		},
		{
			name: "a pseudo-version on a release only to another on the same release's minor",
			units: units(
				unit{dir: "hack/integrations/a", modules: map[string]module{
					"k8s.io/apimachinery": mod("k8s.io/apimachinery", "v0.36.2"),
					"volcano.sh/apis":     mod("volcano.sh/apis", "v1.13.1-0.20251028070205-46d20c0699e7"),
				}, kubernetesBased: map[string]bool{"k8s.io/apimachinery": true, "volcano.sh/apis": true}},
				unit{dir: "hack/integrations/b", modules: map[string]module{
					"k8s.io/apimachinery": mod("k8s.io/apimachinery", "v0.36.2"),
					"volcano.sh/apis":     mod("volcano.sh/apis", "v1.14.1-0.20260301000000-0123456789ab"),
				}, kubernetesBased: map[string]bool{"k8s.io/apimachinery": true, "volcano.sh/apis": true}},
				unit{dir: "hack/integrations/c", modules: map[string]module{
					"k8s.io/apimachinery": mod("k8s.io/apimachinery", "v0.36.2"),
					"volcano.sh/apis":     mod("volcano.sh/apis", "v1.13.1-0.20251201000000-0123456789ab"),
				}, kubernetesBased: map[string]bool{"k8s.io/apimachinery": true, "volcano.sh/apis": true}},
			),
			want: map[string][]string{"hack/integrations/a": {"volcano.sh/apis@v1.13.1-0.20251201000000-0123456789ab"}},
		},
		{
			name: "a module replaced alike is required alike; one replaced by another version is left",
			units: units(
				unit{dir: ".", modules: map[string]module{
					"k8s.io/kube-scheduler": replaced("k8s.io/kube-scheduler", "v0.31.8", "v0.37.2"),
					"k8s.io/cloud-provider": replaced("k8s.io/cloud-provider", "v0.31.8", "v0.37.2"),
				}},
				unit{dir: "hack/k8s", modules: map[string]module{
					"k8s.io/kube-scheduler": replaced("k8s.io/kube-scheduler", "v0.0.0", "v0.37.2"),
					"k8s.io/cloud-provider": replaced("k8s.io/cloud-provider", "v0.37.2", "v0.37.2"),
				}},
				unit{dir: "hack/integrations/old", modules: map[string]module{
					"k8s.io/kube-scheduler": replaced("k8s.io/kube-scheduler", "v0.0.0", "v0.31.1"),
				}},
			),
			want: map[string][]string{
				".":        {"k8s.io/cloud-provider@v0.37.2"},
				"hack/k8s": {"k8s.io/kube-scheduler@v0.31.8"},
			},
		},
		{
			name: "a module replaced is required at the version another unit builds it at without a replace",
			units: units(
				unit{dir: ".", modules: map[string]module{
					"k8s.io/apiextensions-apiserver": replaced("k8s.io/apiextensions-apiserver", "v0.37.0", "v0.37.2"),
				}},
				unit{dir: "hack/integrations/jobset", modules: map[string]module{
					"k8s.io/apiextensions-apiserver": mod("k8s.io/apiextensions-apiserver", "v0.37.2"),
				}},
			),
			want: map[string][]string{".": {"k8s.io/apiextensions-apiserver@v0.37.2"}},
		},
		{
			name: "a replace of the required version only is left: a higher requirement would escape it",
			units: units(
				unit{dir: ".", modules: map[string]module{
					"k8s.io/kube-scheduler": func() module {
						m := replaced("k8s.io/kube-scheduler", "v0.0.0", "v0.37.2")
						m.pinned = true
						return m
					}(),
				}},
				unit{dir: "hack/k8s", modules: map[string]module{
					"k8s.io/kube-scheduler": replaced("k8s.io/kube-scheduler", "v0.31.8", "v0.37.2"),
				}},
			),
			want: map[string][]string{},
		},
		{
			name: "nothing moves when every unit is aligned",
			units: units(
				unit{dir: ".", modules: map[string]module{"google.golang.org/grpc": mod("google.golang.org/grpc", "v1.83.2")}},
				unit{dir: "hack/k8s", modules: map[string]module{"google.golang.org/grpc": mod("google.golang.org/grpc", "v1.83.2")}},
			),
			want: map[string][]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plan(tt.units)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// The modules a unit builds are those providing its tools.go's imports, each
// the longest module path that holds the package; a unit with no tools.go
// builds none.
func TestBuilds(t *testing.T) {
	dir := t.TempDir()
	tools := "//go:build tools\n\npackage tools\n\nimport _ \"sigs.k8s.io/kueue/cmd/kueue\"\n"
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(tools), 0o644); err != nil {
		t.Fatal(err)
	}
	required := map[string]bool{"sigs.k8s.io/kueue": true, "sigs.k8s.io/kueue/cmd": false, "k8s.io/api": true, "sigs.k8s.io/kueuex": true}
	got, err := builds(dir, required)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"sigs.k8s.io/kueue": true}, got); diff != "" {
		t.Errorf("builds (-want +got):\n%s", diff)
	}
	if got, err := builds(t.TempDir(), required); err != nil || got != nil {
		t.Errorf("a unit without tools.go: got %v, %v; want nothing", got, err)
	}
}
