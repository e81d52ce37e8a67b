package devcluster

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every kwok stage that writes a pod's or a node's status names its uid in
// its patch: kwok queues stages by namespace/name and patches by name, so a
// stage queued for an object that is gone must not land on the one created
// in its place under the same name (the API server refuses a patch whose uid
// differs: test/e2e/lifecycle shows it for pods). statusTemplate cannot carry
// the uid: its patch is the status alone.
func TestStagesPatchOnlyTheirOwnObject(t *testing.T) {
	for file, want := range map[string]int{"stages/pod.yaml": 6, "stages/node.yaml": 2} {
		b, err := stageFiles.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		stages, err := decodeManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		patching := 0
		for _, s := range stages {
			if s.GetKind() != "Stage" {
				continue
			}
			if tpl, _, _ := unstructured.NestedString(s.Object, "spec", "next", "statusTemplate"); tpl != "" {
				t.Errorf("%s, stage %s: a statusTemplate patches the status alone, without the uid", file, s.GetName())
			}
			patches, _, _ := unstructured.NestedSlice(s.Object, "spec", "next", "patches")
			for i, p := range patches {
				p, _ := p.(map[string]any)
				tpl, _ := p["template"].(string)
				root, _ := p["root"].(string)
				if root != "" || !strings.Contains(tpl, "uid: {{ .metadata.uid | Quote }}") {
					t.Errorf("%s, stage %s, patch %d: want a patch of the whole object naming metadata.uid, got root %q and template:\n%s", file, s.GetName(), i, root, tpl)
				}
				// Sent to the object itself, the status in a patch is dropped
				// without an error: the simulated objects would stop changing.
				if p["subresource"] != "status" || p["type"] != "strategic" {
					t.Errorf("%s, stage %s, patch %d: want a strategic merge patch of the status subresource, got subresource %v and type %v", file, s.GetName(), i, p["subresource"], p["type"])
				}
				patching++
			}
		}
		if patching != want {
			t.Errorf("%s: want the %d stages that write status to patch it, found %d patches", file, want, patching)
		}
	}
}
