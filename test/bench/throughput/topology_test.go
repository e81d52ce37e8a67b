//go:build bench

package throughput

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// rackKey is the racks' node label (specFmt: racks of rackSize nodes).
const (
	rackKey  = "example.com/rack"
	rackSize = 20
)

// TestTopologyGangs is issue 24's side-by-side: 20 gangs × 32 one-GPU DRA
// ranks, each required in one rack, under kube-scheduler 1.37's
// TopologyAwareWorkloadScheduling (upstream profile: the in-tree
// PodGroup's spec.schedulingConstraints.topology) and under Lockstep (the
// same field of its PodGroup). It runs from 200 nodes on (10 racks of 160
// GPUs: 5 gangs a rack); `make bench` runs it at 1,000 nodes in 50 racks.
// Each wave also checks the placement: every gang in one rack, under both
// schedulers — a correctness check, never one on time.
func TestTopologyGangs(t *testing.T) {
	if nodes < 200 {
		t.Logf("at %d nodes: the topology scenario runs from 200 nodes on (the 1,000-node run of `make bench`)", nodes)
		return
	}
	compare(t, workload{
		name:   fmt.Sprintf("(e) 20 gangs × 32 one-GPU DRA ranks, each required in one rack (%s), %d nodes × 8 GPUs in %d racks", rackKey, nodes, (nodes+rackSize-1)/rackSize),
		groups: 20, ranks: 32, topology: rackKey,
	})
}

// checkOneDomain fails the test for every gang of the wave whose pods are
// not all bound in one domain of w.topology (or whose pods are on nodes
// without the label).
func checkOneDomain(t *testing.T, ctx context.Context, h *harness.Harness, v variant, ns string, w workload) {
	t.Helper()
	nodeList, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	domainOf := map[string]string{}
	for _, n := range nodeList.Items {
		domainOf[n.Name] = n.Labels[w.topology]
	}
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	domains := map[string]map[string]int{} // group → domain → pods
	for i := range pods.Items {
		p := &pods.Items[i]
		g := groupOf(p)
		if domains[g] == nil {
			domains[g] = map[string]int{}
		}
		domains[g][domainOf[p.Spec.NodeName]]++
	}
	var spread []string
	for g, ds := range domains {
		if _, unlabelled := ds[""]; len(ds) != 1 || unlabelled {
			spread = append(spread, fmt.Sprintf("%s %v", g, ds))
		}
	}
	sort.Strings(spread)
	if len(domains) != w.groups {
		t.Errorf("%s: %d gangs bound, want %d", v.name, len(domains), w.groups)
	}
	if len(spread) > 0 {
		t.Errorf("%s did not keep %d of %d gangs in one %s: %s", v.name, len(spread), w.groups, w.topology, strings.Join(spread, "; "))
		return
	}
	t.Logf("%s: each of the %d gangs in one %s", v.name, w.groups, w.topology)
}
