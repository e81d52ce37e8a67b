package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	simreport "github.com/lockstep-dev/lockstep/internal/simulate/report"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// simulator is the user the simulation runs as (--as): bound to the
// ClusterRole of docs/simulate-clusterrole.yaml and nothing else, so it
// can list nodes, slices and classes and write nothing.
const simulator = "lockstep-e2e-simulator"

// Seed 004 on the live cluster's 3 nodes × 2 GPUs: pod by pod neither Job
// completes and all 6 GPUs are held idle; under Lockstep and the in-tree
// gang both complete, one after the other, on the cluster's own nodes,
// with nothing held idle. The workload's namespace, Jobs and claim
// template are not created on the cluster.
func TestSimulateFromClusterReadsOnly(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 3*time.Minute)
	bindSimulator(ctx, t, h)
	nodes, err := h.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}

	start := time.Now()
	out, stderr, err := run(h, simulator, "-o", "json", "--job-details")
	if err != nil {
		t.Fatalf("lockstep simulate: %v\n%s", err, stderr)
	}
	t.Logf("lockstep simulate --from-cluster -o json took %s", time.Since(start).Round(time.Millisecond))
	var r simreport.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("decoding -o json: %v\n%s", err, out)
	}
	if r.Cluster.Nodes != len(names) || r.Cluster.Devices != 6 {
		t.Errorf("cluster read: %d nodes, %d devices; want %d nodes (%v), 6 devices", r.Cluster.Nodes, r.Cluster.Devices, len(names), names)
	}
	var got []string
	for _, s := range r.Schedulers {
		got = append(got, fmt.Sprintf("%s completed=%d neverStarted=%d heldIdle>0=%v", s.Name, s.JobsCompleted, s.JobsNeverStarted, s.DeviceHoursHeldIdle > 0))
		for _, j := range s.JobDetails {
			for _, n := range append(slices.Clone(j.Nodes), j.HeldOn...) {
				if !slices.Contains(names, n) {
					t.Errorf("%s: %s ran on %q, not a node of the cluster %v", s.Name, j.Job, n, names)
				}
			}
		}
	}
	want := []string{
		"lockstep completed=2 neverStarted=0 heldIdle>0=false",
		"pod-by-pod completed=0 neverStarted=2 heldIdle>0=true",
		"in-tree-gang completed=2 neverStarted=0 heldIdle>0=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schedulers (-want,+got):\n%s", diff)
	}

	// Nothing of the workload reached the cluster.
	if _, err := h.Client.CoreV1().Namespaces().Get(ctx, "ml-team", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace ml-team of the workload: got %v, want NotFound", err)
	}
	jobs, err := h.Client.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Name == "train-a" || j.Name == "train-b" {
			t.Errorf("Job %s/%s of the workload on the cluster after the simulation", j.Namespace, j.Name)
		}
	}

	text, stderr, err := run(h, simulator)
	if err != nil {
		t.Fatalf("lockstep simulate (table): %v\n%s", err, stderr)
	}
	t.Logf("lockstep simulate --from-cluster:\n%s", text)
}

// A user the role is not bound to is refused, and the refusal says what
// could not be read.
func TestSimulateFromClusterWithoutTheRoleSaysWhatItCouldNotRead(t *testing.T) {
	h := harness.Get(t)
	_, stderr, err := run(h, "lockstep-e2e-nobody")
	if err == nil {
		t.Fatal("lockstep simulate as a user with no role succeeded, want a refusal")
	}
	for _, want := range []string{"--from-cluster", "listing nodes", "forbidden"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

// run runs `lockstep simulate --from-cluster -f examples/simulate/seed004.yaml`
// as user.
func run(h *harness.Harness, user string, args ...string) ([]byte, string, error) {
	return runOn(h, user, filepath.Join(h.RepoRoot, "examples", "simulate", "seed004.yaml"), args...)
}

// runOn runs `lockstep simulate --from-cluster -f workload` as user.
func runOn(h *harness.Harness, user, workload string, args ...string) ([]byte, string, error) {
	args = append([]string{"simulate", "--from-cluster", "--kubeconfig", h.Kubeconfig, "--as", user, "-f", workload}, args...)
	cmd := exec.Command(filepath.Join(h.BinDir, "lockstep"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return out, stderr.String(), err
}

// bindSimulator creates the ClusterRole of docs/simulate-clusterrole.yaml
// and binds it to the simulator user.
func bindSimulator(ctx context.Context, t *testing.T, h *harness.Harness) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.RepoRoot, "docs", "simulate-clusterrole.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		t.Fatal(err)
	}
	role.Name = "e2e-" + role.Name
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: simulator}}}
	rbac := h.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
}
