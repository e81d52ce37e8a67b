package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A LeaderWorkerSet is built as its controllers create it — per replica a
// leader and size-1 workers — and as Lockstep's integration groups it: one
// gang per replica, of size members.
func TestLeaderWorkerSetGangPerReplica(t *testing.T) {
	const doc = `
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: infer, namespace: ml, annotations: {sim.lockstep.dev/runtime: 1h}}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 3
    workerTemplate:
      spec:
        containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
`
	wl, err := Load([]Source{{Name: "lws.yaml", Data: []byte(doc)}}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(wl.Jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(wl.Jobs))
	}
	j := wl.Jobs[0]
	got := map[string][]string{}
	for i, p := range j.Pods {
		got[j.GroupOf[i]] = append(got[j.GroupOf[i]], p.Name)
	}
	want := map[string][]string{"infer-0": {"infer-0", "infer-0-1", "infer-0-2"}, "infer-1": {"infer-1", "infer-1-1", "infer-1-2"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods by group (-want,+got):\n%s", diff)
	}
	if len(j.Gangs) != 2 || j.Need != 6 || j.Tree != nil {
		t.Errorf("gangs %d, need %d, tree %v; want 2 gangs of 3, no tree", len(j.Gangs), j.Need, j.Tree)
	}
}
