package devcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A directory is read as kubectl apply -f reads one: its .yaml, .yml and
// .json files, in name order, not its subdirectories or other files.
func TestManifestFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.yaml", "a.json", "c.yml", "README.md", "sub/d.yaml"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := manifestFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "c.yml")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if got, err := manifestFiles(filepath.Join(dir, "b.yaml")); err != nil || len(got) != 1 {
		t.Errorf("a file: %v, %v; want itself", got, err)
	}
	if _, err := manifestFiles(filepath.Join(dir, "sub", "none")); err == nil {
		t.Error("a missing path: no error")
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := manifestFiles(empty); err == nil || !strings.Contains(err.Error(), "no manifests") {
		t.Errorf("a directory without manifests: %v, want an error saying so", err)
	}
}

// InstallCRDs installs CRDs only: any other object in the manifests is an
// error naming the file and the object, and nothing is applied, not even
// the CRDs before it.
func TestInstallCRDsRefusesOtherKinds(t *testing.T) {
	f := filepath.Join(t.TempDir(), "crds.yaml")
	manifest := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-crd\n"
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	err := InstallCRDs(context.Background(), dyn, f)
	if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "ConfigMap not-a-crd is not a CustomResourceDefinition") {
		t.Fatalf("got %v, want the file and the object named", err)
	}
	if n := len(dyn.Actions()); n != 0 {
		t.Errorf("%d calls to the API server, want none", n)
	}
}

// Waiting for CRDs retries an error reading one (an API server still
// starting) and ends once every one is established.
func TestCRDsEstablishedRetriesReadErrors(t *testing.T) {
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "things.example.com"},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), crd)
	failures := 2
	dyn.PrependReactor("get", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
		if failures > 0 {
			failures--
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	if err := crdsEstablished(context.Background(), dyn, []string{"things.example.com"}); err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		t.Errorf("%d read errors left: the wait ended before reading the CRD", failures)
	}
}
