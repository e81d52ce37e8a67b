package devcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// gang is PodGroup ml/train (gang, minCount 3) with two members to place,
// one gated member, and a pod of another scheduler that names the group
// but is not one of its members.
const gang = `apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: scheduling.lockstep.dev/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: 3}}
---
apiVersion: v1
kind: Pod
metadata: {name: train-0, namespace: ml, labels: {scheduling.lockstep.dev/pod-group: train}}
spec: {schedulerName: lockstep, terminationGracePeriodSeconds: 0, containers: [{name: main, image: sim}]}
---
apiVersion: v1
kind: Pod
metadata: {name: train-1, namespace: ml, labels: {scheduling.lockstep.dev/pod-group: train}}
spec: {schedulerName: lockstep, terminationGracePeriodSeconds: 0, containers: [{name: main, image: sim}]}
---
apiVersion: v1
kind: Pod
metadata: {name: train-2, namespace: ml, labels: {scheduling.lockstep.dev/pod-group: train}}
spec:
  schedulerName: lockstep
  terminationGracePeriodSeconds: 0
  schedulingGates: [{name: example.com/hold}]
  containers: [{name: main, image: sim}]
---
apiVersion: v1
kind: Pod
metadata: {name: stray, namespace: ml, labels: {scheduling.lockstep.dev/pod-group: train}}
spec: {schedulerName: other-scheduler, terminationGracePeriodSeconds: 0, containers: [{name: main, image: sim}]}
`

// counts are what `get -o json` and `explain -o json` both report of a gang.
type counts struct {
	Members, Bound, Pending int
}

// The user commands on the local cluster, reached as kubectl reaches a
// cluster: through a $KUBECONFIG list whose first file names the context
// (and its namespace) and whose second holds the cluster and credentials
// `lockstep dev up` wrote. `get podgroups` counts a gang as the scheduler
// and explain do — the pod of another scheduler is no member, the gated
// one is a member that is not pending, and no member binds before the gate
// is gone — then, with the gate removed, the gang binds whole and both say
// so.
func TestUserCommandsOnLocalCluster(t *testing.T) {
	c := newCLI(t)
	dir := stateDir(t, c)
	base := freeBase(t)
	t.Cleanup(func() { c.run(t, time.Minute, "lockstep", "dev", "down", "--state-dir", dir) })
	if out, code := c.run(t, 4*time.Minute, "lockstep", "dev", "up", "--detach", "--state-dir", dir, "--base-port", strconv.Itoa(base)); code != 0 {
		t.Fatalf("dev up: exit %d:\n%s", code, out)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if out, code := c.runWith(t, time.Minute, invocation{stdin: gang}, "kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-"); code != 0 {
		t.Fatalf("kubectl apply: exit %d:\n%s", code, out)
	}
	env := []string{"KUBECONFIG=" + strings.Join([]string{filepath.Join(t.TempDir(), "missing"), mlContext(t, kubeconfig), kubeconfig}, string(os.PathListSeparator))}

	// Nothing binds while the gang is below minCount without its gated member.
	gated := counts{Members: 3, Bound: 0, Pending: 2}
	if got := getCounts(t, c, env); got != gated {
		t.Errorf("get podgroups while gated: got %+v, want %+v", got, gated)
	}
	if got := explainCounts(t, c, env); got != gated {
		t.Errorf("explain while gated: got %+v, want %+v", got, gated)
	}
	wide, code := c.runWith(t, time.Minute, invocation{env: env}, "lockstep", "get", "podgroups", "-o", "wide")
	want := map[string]string{"NAME": "train", "BOUND/MEMBERS": "0/3", "PENDING": "2", "GATED": "1"}
	if got := columns(wide, "train", "NAME", "BOUND/MEMBERS", "PENDING", "GATED"); code != 0 || !cmp.Equal(want, got) {
		t.Errorf("get podgroups -o wide: want %v, got %v (exit %d):\n%s", want, got, code, wide)
	}

	if out, code := c.run(t, time.Minute, "kubectl", "--kubeconfig", kubeconfig, "-n", "ml", "patch", "pod", "train-2", "--type=json",
		"-p", `[{"op":"remove","path":"/spec/schedulingGates"}]`); code != 0 {
		t.Fatalf("removing the gate: exit %d:\n%s", code, out)
	}
	bound := counts{Members: 3, Bound: 3}
	deadline := time.Now().Add(time.Minute)
	got := getCounts(t, c, env)
	for got != bound && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		got = getCounts(t, c, env)
	}
	if got != bound {
		t.Fatalf("get podgroups a minute after the gate was removed: got %+v, want %+v", got, bound)
	}
	if got := explainCounts(t, c, env); got != bound {
		t.Errorf("explain once bound: got %+v, want %+v", got, bound)
	}

	// The kubectl plugin reads the same $KUBECONFIG; -A names the namespace.
	out, code := c.runWith(t, time.Minute, invocation{env: env}, "kubectl-lockstep", "get", "podgroups", "-A")
	want = map[string]string{"NAMESPACE": "ml", "MINCOUNT": "3", "BOUND/MEMBERS": "3/3", "SCHEDULED": "True"}
	if got := columns(out, "ml", "NAMESPACE", "MINCOUNT", "BOUND/MEMBERS", "SCHEDULED"); code != 0 || !cmp.Equal(want, got) {
		t.Errorf("kubectl lockstep get podgroups -A: want %v, got %v (exit %d):\n%s", want, got, code, out)
	}
	// With no kubeconfig to be found, the error says what to do.
	out, code = c.runWith(t, time.Minute, invocation{env: []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "missing")}}, "lockstep", "get", "podgroups")
	if code == 0 || !strings.Contains(out, "no cluster to talk to") || !strings.Contains(out, "pass --kubeconfig FILE or set $KUBECONFIG") {
		t.Errorf("get podgroups with no kubeconfig: want the fix named, exit %d:\n%s", code, out)
	}
}

// mlContext writes a kubeconfig holding only context "ml": the local
// cluster's cluster and user (read from the kubeconfig `dev up` wrote, in
// a later file of the list) in namespace ml, as the current context.
func mlContext(t *testing.T, kubeconfig string) string {
	t.Helper()
	dev, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur := dev.Contexts[dev.CurrentContext]
	if cur == nil {
		t.Fatalf("%s has no current context", kubeconfig)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Contexts["ml"] = &clientcmdapi.Context{Cluster: cur.Cluster, AuthInfo: cur.AuthInfo, Namespace: "ml"}
	cfg.CurrentContext = "ml"
	path := filepath.Join(t.TempDir(), "ml-context")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// getCounts runs `lockstep get podgroup/train -o json` in the context's namespace.
func getCounts(t *testing.T, c *cli, env []string) counts {
	t.Helper()
	out, code := c.runWith(t, time.Minute, invocation{env: env, stdoutOnly: true}, "lockstep", "get", "podgroup/train", "-o", "json")
	if code != 0 {
		t.Fatalf("get podgroup/train -o json: exit %d:\n%s", code, out)
	}
	var rows []counts
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("get podgroup/train -o json: %v, want one row:\n%s", err, out)
	}
	return rows[0]
}

// explainCounts runs `lockstep explain podgroup train -o json` in the context's namespace.
func explainCounts(t *testing.T, c *cli, env []string) counts {
	t.Helper()
	out, code := c.runWith(t, time.Minute, invocation{env: env, stdoutOnly: true}, "lockstep", "explain", "podgroup", "train", "-o", "json")
	if code != 0 {
		t.Fatalf("explain podgroup train -o json: exit %d:\n%s", code, out)
	}
	var r counts
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("explain -o json: %v:\n%s", err, out)
	}
	return r
}

// columns reads the named columns of the table row whose first field is
// first (headers and cells are single words, up to the last column).
func columns(table, first string, names ...string) map[string]string {
	lines := strings.Split(table, "\n")
	header := strings.Fields(lines[0])
	for _, line := range lines[1:] {
		cells := strings.Fields(line)
		if len(cells) == 0 || cells[0] != first {
			continue
		}
		out := map[string]string{}
		for i, h := range header {
			if i < len(cells) && slices.Contains(names, h) {
				out[h] = cells[i]
			}
		}
		return out
	}
	return nil
}
