package workload

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// The jobs of the trees trace are built as their controllers and
// Lockstep's integrations would build them: each role's pods, one PodGroup
// per role with the role's own minimum, hung under a root
// CompositePodGroup that needs all of them; a Job is a flat gang.
func TestRolesJobsMakeTrees(t *testing.T) {
	b, err := os.ReadFile("../testdata/trees/workload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wl, err := Load([]Source{{Name: "workload.yaml", Data: b}}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type group struct {
		Name, Parent string
		MinCount     int
		Pods         []string
	}
	type job struct {
		Root   string
		Need   int
		Groups []group
	}
	got := map[string]job{}
	for _, j := range wl.Jobs {
		out := job{Need: j.Need}
		if j.Tree != nil {
			_, need := podgroup.CompositeGang(j.Tree)
			out.Root = j.Tree.Name
			if need != len(j.Gangs) {
				t.Errorf("%s: root needs %d of %d groups", j.Ref(), need, len(j.Gangs))
			}
		}
		for _, pg := range j.Gangs {
			g := group{Name: pg.Name, Parent: podgroup.ParentOf(pg), MinCount: podgroup.MinCount(pg)}
			if pg.Spec.SchedulingPolicy.Gang == nil {
				g.MinCount = 0
			}
			for i, p := range j.Pods {
				if j.GroupOf[i] == pg.Name {
					g.Pods = append(g.Pods, p.Name)
				}
			}
			out.Groups = append(out.Groups, g)
		}
		got[j.Ref()] = out
	}
	want := map[string]job{
		"RayCluster ml/ray": {Root: "ray", Need: 3, Groups: []group{
			{Name: "ray-head", Parent: "ray", MinCount: 1, Pods: []string{"ray-head-0"}},
			{Name: "ray-gpu", Parent: "ray", MinCount: 2, Pods: []string{"ray-gpu-0", "ray-gpu-1", "ray-gpu-2", "ray-gpu-3"}},
		}},
		"PyTorchJob ml/elastic": {Root: "elastic", Need: 3, Groups: []group{
			{Name: "elastic-master", Parent: "elastic", MinCount: 1, Pods: []string{"elastic-master-0"}},
			{Name: "elastic-worker", Parent: "elastic", MinCount: 2, Pods: []string{"elastic-worker-0", "elastic-worker-1", "elastic-worker-2", "elastic-worker-3"}},
		}},
		"MPIJob ml/allreduce": {Root: "allreduce", Need: 3, Groups: []group{
			{Name: "allreduce-launcher", Parent: "allreduce", MinCount: 1, Pods: []string{"allreduce-launcher-0"}},
			{Name: "allreduce-worker", Parent: "allreduce", MinCount: 2, Pods: []string{"allreduce-worker-0", "allreduce-worker-1", "allreduce-worker-2", "allreduce-worker-3"}},
		}},
		"Job ml/urgent": {Need: 8, Groups: []group{
			{Name: "urgent", MinCount: 8, Pods: []string{"urgent-0", "urgent-1", "urgent-2", "urgent-3", "urgent-4", "urgent-5", "urgent-6", "urgent-7"}},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want,+got):\n%s", diff)
	}
}
