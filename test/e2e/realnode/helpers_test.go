package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/internal/devcluster/gpudriver"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// rankJob creates an Indexed Job of n ranks, each with a claim for gpus
// GPUs, running lockstep.local/rank on the real nodes, and deletes it when
// the test ends. tweaks change the Job before it is created.
func rankJob(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, n int32, gpus int64, tweaks ...func(*batchv1.Job)) {
	t.Helper()
	if h.Cluster == nil || len(h.Cluster.RealNodes()) == 0 {
		t.Fatalf("the real-node tests need a cluster with real nodes, which the package starts itself: unset %s", harness.EnvKubeconfig)
	}
	tmpl := fmt.Sprintf("gpus-%d", gpus)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, tmpl, gpudriver.DefaultDriver, gpus), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "10m").Req(corev1.ResourceMemory, "16Mi").ClaimTemplate("gpu", tmpl).Obj()
	c := &pod.Spec.Containers[0]
	c.Name, c.Image, c.ImagePullPolicy = "rank", devcluster.RankImage, corev1.PullNever
	c.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	// Ready once the rank serves: its process runs (not runc's init before the
	// exec) and /exit answers.
	c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/devices", Port: intstr.FromInt32(8080)}}}
	pod.Spec.NodeSelector = map[string]string{devcluster.RealNodeLabel: "true"}
	pod.Spec.Tolerations = []corev1.Toleration{devcluster.RealNodeToleration}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	job := builders.IndexedJob(ns, name, n, pod)
	for _, tweak := range tweaks {
		tweak(job)
	}
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Before the namespace goes (cleanups run last in, first out): a Job with
	// backoffLimitPerIndex keeps its failed pods while it cannot replace them.
	t.Cleanup(func() {
		_ = h.Client.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
}

// perIndexBackoff lets each index fail once: a rank's own failure is not
// the Job's end, so the gang can be restarted.
func perIndexBackoff(job *batchv1.Job) {
	job.Spec.BackoffLimit = nil
	job.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
}

// priority gives the Job's ranks a PriorityClass.
func priority(class string) func(*batchv1.Job) {
	return func(job *batchv1.Job) { job.Spec.Template.Spec.PriorityClassName = class }
}

// rank is one running rank: its pod, node, IP and the devices its claims
// were allocated (sorted).
type rank struct {
	Pod     string
	Index   string // the Job's completion index
	UID     types.UID
	Node    string
	IP      string
	Devices []string
}

// runningRanks are the Job's pods that run (containers ready) on a node,
// by UID, with the devices their claims hold.
func runningRanks(ctx context.Context, h *harness.Harness, ns, job string) (map[types.UID]rank, error) {
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]rank{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || !containersReady(&p) {
			continue
		}
		r := rank{Pod: p.Name, Index: p.Annotations[batchv1.JobCompletionIndexAnnotation], UID: p.UID, Node: p.Spec.NodeName, IP: p.Status.PodIP}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName == nil {
				continue
			}
			claim, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if a := claim.Status.Allocation; a != nil {
				for _, d := range a.Devices.Results {
					if d.Pool != p.Spec.NodeName {
						return nil, fmt.Errorf("pod %s on %s holds device %s of pool %s", p.Name, p.Spec.NodeName, d.Device, d.Pool)
					}
					r.Devices = append(r.Devices, d.Device)
				}
			}
		}
		slices.Sort(r.Devices)
		out[p.UID] = r
	}
	return out, nil
}

func containersReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.ContainersReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRanks waits until exactly n ranks of the Job run, none of them in
// old, and returns them.
func waitRanks(t *testing.T, ctx context.Context, h *harness.Harness, ns, job string, n int, old map[types.UID]rank) map[types.UID]rank {
	t.Helper()
	var got map[types.UID]rank
	harness.Eventually(t, ctx, fmt.Sprintf("%d new ranks of %s running in containers", n, job), func(ctx context.Context) (bool, string, error) {
		var err error
		if got, err = runningRanks(ctx, h, ns, job); err != nil {
			return false, "", err
		}
		for uid := range got {
			if _, was := old[uid]; was {
				return false, "a rank that ran before still runs", nil
			}
		}
		return len(got) == n, fmt.Sprintf("%d running", len(got)), nil
	})
	return got
}

// rankLine is the first line the rank's container printed, read through
// the API server from its kubelet.
func rankLine(ctx context.Context, h *harness.Harness, ns, pod string) (string, error) {
	b, err := h.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "rank"}).DoRaw(ctx)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line, nil
}

// assertSawItsDevices checks that each rank's container saw exactly the
// devices its claim was allocated, and that its node's driver prepared them.
func assertSawItsDevices(t *testing.T, ctx context.Context, h *harness.Harness, ns string, ranks map[types.UID]rank) {
	t.Helper()
	for _, r := range ranks {
		want := fmt.Sprintf("rank %s saw devices %s", r.Pod, strings.Join(r.Devices, ","))
		var got string
		harness.Eventually(t, ctx, "rank "+r.Pod+"'s output", func(ctx context.Context) (bool, string, error) {
			line, err := rankLine(ctx, h, ns, r.Pod)
			got = line
			return err == nil && line != "", fmt.Sprintf("%q %v", line, err), nil
		})
		if got != want {
			t.Errorf("rank %s on %s: printed %q, want %q (its claim's devices)", r.Pod, r.Node, got, want)
		}
		if prepared := preparedFor(t, h, r.Node, ns); !containsAll(prepared, r.Devices) {
			t.Errorf("rank %s: the driver of %s prepared %v for namespace %s, want %v among them", r.Pod, r.Node, prepared, ns, r.Devices)
		}
	}
}

// preparedFor are the devices a node's driver has prepared for claims of
// namespace ns (its record: prepared.json), sorted.
func preparedFor(t *testing.T, h *harness.Harness, node, ns string) []string {
	t.Helper()
	p, err := gpudriver.Prepared(h.Cluster.DriverStateDir(node))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range p {
		if c.Namespace == ns {
			out = append(out, c.Devices...)
		}
	}
	slices.Sort(out)
	return out
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// rankProcesses are the PIDs of this machine's processes that run the rank
// binary for pod: the real processes of its container.
func rankProcesses(pod string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(cmd, []byte("/rank\x00")) && string(cmd) != "/rank" {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return string(kv) == "POD_NAME="+pod }) {
			out = append(out, pid)
		}
	}
	return out
}

// waitNoProcesses waits until none of the pods has a process left.
func waitNoProcesses(t *testing.T, ctx context.Context, what string, pods []string) {
	t.Helper()
	harness.Eventually(t, ctx, what, func(context.Context) (bool, string, error) {
		for _, p := range pods {
			if pids := rankProcesses(p); len(pids) > 0 {
				return false, fmt.Sprintf("rank %s still runs as pids %v", p, pids), nil
			}
		}
		return true, "", nil
	})
}

func podNames(ranks map[types.UID]rank) []string {
	var out []string
	for _, r := range ranks {
		out = append(out, r.Pod)
	}
	slices.Sort(out)
	return out
}

// incarnation is the number of the group's current incarnation (0 before
// the first).
func incarnation(ctx context.Context, h *harness.Harness, ns, group string) (int32, error) {
	st, err := h.State(ctx, ns, group)
	if err != nil || st.Incarnation == nil {
		return 0, err
	}
	return st.Incarnation.Number, nil
}

// settle is how long a test watches that nothing more happens.
const settle = 5 * time.Second

// assertJobCountedNothing checks that the Job counted no rank as succeeded
// or failed: a rank Lockstep stops (a gang restart, a preemption) exits as a
// stopped process does (143), which the rule Lockstep's admission gives the
// Job ignores; had it exited 0, the Job would count its index as complete.
func assertJobCountedNothing(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, failedByItself int32) {
	t.Helper()
	job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := job.Status; st.Succeeded != 0 || st.CompletedIndexes != "" || st.Failed != failedByItself {
		t.Errorf("Job %s: succeeded %d (indexes %q), failed %d: want none succeeded and %d failed", name, st.Succeeded, st.CompletedIndexes, st.Failed, failedByItself)
	}
}
