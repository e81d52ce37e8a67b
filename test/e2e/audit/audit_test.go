package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/audit"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// auditor is the user the audit runs as (kubectl's --as): bound to the
// ClusterRole of docs/audit-clusterrole.yaml and nothing else, so the
// audit can read only what the role grants and write nothing.
const auditor = "lockstep-e2e-auditor"

func TestAuditFindsPartialStartsAndNotGangs(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	bindAuditor(ctx, t, h)

	// A Lockstep gang running whole, and a healthy Job of kube-scheduler
	// started whole. One after the other: two schedulers allocating
	// devices at the same moment can both take one (neither sees the
	// other's allocation in flight).
	createJob(ctx, t, h, ns, "gang", 2, 2, lockv1.SchedulerName)
	waitBound(t, ctx, h, ns, map[string]int{"gang": 2})
	createJob(ctx, t, h, ns, "healthy", 2, 2, corev1.DefaultSchedulerName)
	waitBound(t, ctx, h, ns, map[string]int{"gang": 2, "healthy": 2})

	// Seed 004 pod by pod: two 4-rank Jobs whose ranks arrive
	// interleaved (both scaled up one rank at a time) → 3 + 3 on the 6
	// GPUs left, each 4th rank unschedulable.
	for _, name := range []string{"train-a", "train-b"} {
		createJob(ctx, t, h, ns, name, 4, 1, corev1.DefaultSchedulerName)
	}
	for r := 2; r <= 4; r++ {
		for _, name := range []string{"train-a", "train-b"} {
			patch := fmt.Sprintf(`{"spec":{"parallelism":%d}}`, r)
			if _, err := h.Client.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			waitDecided(t, ctx, h, ns, name, r)
		}
	}
	waitBound(t, ctx, h, ns, map[string]int{"gang": 2, "healthy": 2, "train-a": 3, "train-b": 3})
	// A second Lockstep gang, waiting whole: it holds nothing.
	createJob(ctx, t, h, ns, "waiting", 2, 2, lockv1.SchedulerName)
	waitPods(t, ctx, h, ns, "waiting", 2)

	start := time.Now()
	r := runAudit(t, h, ns, "json")
	t.Logf("lockstep audit -o json took %s", time.Since(start).Round(time.Millisecond))

	var got []string
	for _, w := range r.Workloads {
		got = append(got, fmt.Sprintf("%s/%s running=%d/%d pending=%d held=%v partialNow=%v deadlocked=%v gang=%v already=%v",
			w.Kind, w.Name, w.Now.Running, w.Required, w.Now.Pending, w.Now.Held, w.PartialNow, w.Deadlocked, w.Lockstep.Gang, w.Lockstep.Already))
		if w.DeviceHoursHeld <= 0 || w.DeviceHoursHeldByResource["gpu.example.com"] != w.DeviceHoursHeld {
			t.Errorf("%s: device-hours held %v (by resource %v), want > 0, all gpu.example.com", w.Name, w.DeviceHoursHeld, w.DeviceHoursHeldByResource)
		}
	}
	want := []string{
		"Job/train-a running=3/4 pending=1 held=map[gpu.example.com:3] partialNow=true deadlocked=true gang=true already=false",
		"Job/train-b running=3/4 pending=1 held=map[gpu.example.com:3] partialNow=true deadlocked=true gang=true already=false",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workloads reported (-want,+got):\n%s", diff)
	}
	wantDeadlocks := []audit.Deadlock{{Workloads: []string{ns + "/job/train-a", ns + "/job/train-b"}, Resources: []string{"gpu.example.com"}, Held: map[string]int64{"gpu.example.com": 6}}}
	if diff := cmp.Diff(wantDeadlocks, r.Deadlocks); diff != "" {
		t.Errorf("deadlocks (-want,+got):\n%s", diff)
	}
	if r.Totals.DeviceHoursHeld <= 0 || r.Totals.WouldBeGangs != 2 {
		t.Errorf("totals %+v: want device-hours held > 0 and 2 would-be gangs", r.Totals)
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "could not list") {
			t.Errorf("the ClusterRole does not grant what the audit reads: %s", n)
		}
	}
	if r.Window.From.IsZero() || !strings.Contains(r.Window.Basis, "objects that still exist") {
		t.Errorf("window %+v: want its start and what it is made of", r.Window)
	}
	t.Logf("lockstep audit -n %s:\n%s", ns, runAuditText(t, h, ns))
}

// bindAuditor creates the ClusterRole of docs/audit-clusterrole.yaml and
// binds it to the auditor user.
func bindAuditor(ctx context.Context, t *testing.T, h *harness.Harness) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.RepoRoot, "docs", "audit-clusterrole.yaml"))
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
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: auditor}}}
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

// createJob creates an Indexed Job of completions ranks, parallelism at
// once, each with one GPU from ResourceClaimTemplate one-gpu.
func createJob(ctx context.Context, t *testing.T, h *harness.Harness, ns, name string, completions, parallelism int32, scheduler string) {
	t.Helper()
	pod := builders.MakePod().Scheduler(scheduler).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
	job := builders.IndexedJob(ns, name, completions, pod)
	job.Spec.Parallelism = ptr.To(parallelism)
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jobLabel is on the pods of each Job this test creates.
const jobLabel = batchv1.JobNameLabel

func jobPods(ctx context.Context, h *harness.Harness, ns, job string) ([]corev1.Pod, error) {
	list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobLabel + "=" + job})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitDecided waits until the Job has n pods, each bound or found
// unschedulable by kube-scheduler.
func waitDecided(t *testing.T, ctx context.Context, h *harness.Harness, ns, job string, n int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("%d pods of %s bound or unschedulable", n, job), func(ctx context.Context) (bool, string, error) {
		pods, err := jobPods(ctx, h, ns, job)
		if err != nil {
			return false, "", err
		}
		decided := 0
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && (c.Status == corev1.ConditionTrue || c.Reason == corev1.PodReasonUnschedulable) {
					decided++
				}
			}
		}
		return len(pods) == n && decided == n, fmt.Sprintf("%d pods, %d decided", len(pods), decided), nil
	})
}

// waitBound waits until each Job has its number of pods bound.
func waitBound(t *testing.T, ctx context.Context, h *harness.Harness, ns string, want map[string]int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("pods bound %v", want), func(ctx context.Context) (bool, string, error) {
		got := map[string]int{}
		for job := range want {
			pods, err := jobPods(ctx, h, ns, job)
			if err != nil {
				return false, "", err
			}
			for _, p := range pods {
				if p.Spec.NodeName != "" {
					got[job]++
				}
			}
		}
		return cmp.Equal(want, got), fmt.Sprintf("bound %v", got), nil
	})
}

func waitPods(t *testing.T, ctx context.Context, h *harness.Harness, ns, job string, n int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("%d pods of %s", n, job), func(ctx context.Context) (bool, string, error) {
		pods, err := jobPods(ctx, h, ns, job)
		return len(pods) == n, fmt.Sprintf("%d pods", len(pods)), err
	})
}

// runAudit runs `lockstep audit -n ns -o format` as the auditor.
func runAudit(t *testing.T, h *harness.Harness, ns, format string) *audit.Report {
	t.Helper()
	out := auditCommand(t, h, ns, "-o", format)
	var r audit.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("decoding audit -o json: %v\n%s", err, out)
	}
	sort.Slice(r.Workloads, func(i, j int) bool { return r.Workloads[i].Name < r.Workloads[j].Name })
	return &r
}

func runAuditText(t *testing.T, h *harness.Harness, ns string) string {
	t.Helper()
	return string(auditCommand(t, h, ns, "-o", "wide"))
}

func auditCommand(t *testing.T, h *harness.Harness, ns string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.BinDir, "lockstep"), append([]string{"audit", "-n", ns, "--kubeconfig", h.Kubeconfig, "--as", auditor}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lockstep audit %v: %v\n%s", args, err, stderr.String())
	}
	return out
}
