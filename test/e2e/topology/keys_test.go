package topology

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preflight"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestKeyNoNodeCarries: a PodGroup preferring a key no node carries is
// admitted with a warning that names it; preflight then reports that key
// (used, carried by none), the rack key it requires (4 domains, the CPU
// node without it) and the zone.
func TestKeyNoNodeCarries(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	pg := builders.GangPodGroup(ns, "blocky", 2)
	pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: rack}}}
	pg.Annotations = map[string]string{lockv1.PreferredTopologyAnnotation: "example.com/block"}
	w := &harness.Warnings{}
	cfg := rest.CopyConfig(h.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := podgroup.ToUnstructured(pg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(podgroup.Resource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{`metadata.annotations[scheduling.lockstep.dev/preferred-topology]: no node carries the label "example.com/block": this preferred level is never met, the group is placed at its next level; check the key's spelling (` + "`lockstep preflight`" + ` lists the topology keys nodes carry)`}
	if diff := cmp.Diff(want, w.List()); diff != "" {
		t.Errorf("admission warnings (-want,+got):\n%s", diff)
	}

	cmd := exec.Command(filepath.Join(h.BinDir, "lockstep"), "preflight", "--kubeconfig", h.Kubeconfig, "-o", "json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run() // a failed check exits non-zero; the report is printed either way
	var r preflight.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("preflight -o json: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	type key struct {
		Key                           string
		UsedBy, Domains, NodesMissing int
	}
	var got []key
	for _, k := range r.Topology {
		got = append(got, key{k.Key, k.UsedBy, k.Domains, k.NodesMissing})
	}
	if diff := cmp.Diff([]key{{"example.com/block", 1, 0, 9}, {rack, 1, 4, 1}, {zone, 0, 2, 1}}, got); diff != "" {
		t.Errorf("preflight topology (-want,+got):\n%s", diff)
	}
	statuses := map[string]preflight.Status{}
	for _, c := range r.Checks {
		statuses[c.Name] = c.Status
	}
	wantStatus := map[string]preflight.Status{"topology example.com/block": preflight.Warn, "topology " + rack: preflight.Warn, "topology " + zone: preflight.Info}
	for name, s := range wantStatus {
		if statuses[name] != s {
			t.Errorf("preflight check %q: want %s, got %q", name, s, statuses[name])
		}
	}
}
