package explaincmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	lockfake "github.com/lockstep-dev/lockstep/internal/client/clientset/versioned/fake"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// Run prints explain's report in each -o format, for the target Complete
// read, in the namespace it resolved.
func TestRun(t *testing.T) {
	pg := builders.GangPodGroup("ml", "train", 2)
	u, err := podgroup.ToUnstructured(pg)
	if err != nil {
		t.Fatal(err)
	}
	pod := builders.MakePod().Namespace("ml").Name("train-0").Member("train").Obj()
	c := &clientopts.Clients{
		Kube: kubefake.NewClientset(pod),
		Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			podgroup.Resource: "PodGroupList", podgroup.UpstreamResource: "PodGroupList",
			podgroup.CompositeResource: "CompositePodGroupList", podgroup.UpstreamCompositeResource: "CompositePodGroupList"}, u),
		Lockstep: lockfake.NewSimpleClientset(pg),
	}
	const answer = "PodGroup ml/train is waiting for pods: 1 of minCount 2 exist; none is placed until 2 do"
	for _, tc := range []struct {
		format string
		check  func(t *testing.T, out string)
	}{
		{format: "", check: func(t *testing.T, out string) {
			if first, _, _ := strings.Cut(out, "\n"); first != answer {
				t.Errorf("the report does not answer first: %q", out)
			}
			if !strings.Contains(out, "2. Members: 1 exist (0 bound, 1 pending); policy gang, minCount 2") {
				t.Errorf("the report lacks the members:\n%s", out)
			}
		}},
		{format: "name", check: func(t *testing.T, out string) {
			if diff := cmp.Diff("podgroup.scheduling.lockstep.dev/train\n", out); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		}},
		{format: "json", check: func(t *testing.T, out string) {
			var r explain.Report
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			type subset struct {
				Answer, Unit               string
				MinCount, Members, Pending int
			}
			got := subset{Answer: r.Answer, Unit: r.Unit, MinCount: r.MinCount, Members: r.Members, Pending: r.Pending}
			if diff := cmp.Diff(subset{Answer: answer, Unit: "PodGroup ml/train", MinCount: 2, Members: 1, Pending: 1}, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		}},
	} {
		t.Run("-o="+tc.format, func(t *testing.T) {
			o := NewOptions()
			o.Kind, o.Name, o.Client.Namespace, o.Clients, o.Output.Format = "podgroup", "train", "ml", c, tc.format
			var out bytes.Buffer
			if err := o.Run(context.Background(), &out); err != nil {
				t.Fatal(err)
			}
			tc.check(t, out.String())
		})
	}
}
