package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	simreport "github.com/lockstep-dev/lockstep/internal/simulate/report"
	simworkload "github.com/lockstep-dev/lockstep/internal/simulate/workload"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// traceJob is one job of the fidelity trace: ranks pods of one GPU each.
type traceJob struct {
	name             string
	ranks            int32
	arrival, runtime time.Duration
}

// The trace, on 3 nodes × 2 GPUs: a takes 4 GPUs; b (4 ranks) arrives
// while a runs and cannot start; c (2 ranks) arrives next and fits beside
// a; b starts once a is done. Seconds apart, so the control plane's
// latencies cannot reorder them.
var trace = []traceJob{
	{name: "fid-a", ranks: 4, arrival: 0, runtime: 40 * time.Second},
	{name: "fid-b", ranks: 4, arrival: 5 * time.Second, runtime: 10 * time.Second},
	{name: "fid-c", ranks: 2, arrival: 10 * time.Second, runtime: 10 * time.Second},
}

// Fidelity (issue 26, item 4): the trace simulated under lockstep and run
// on the local control plane by the real scheduler (kwok completing each
// pod after its job's runtime) starts the same jobs in the same order on
// the same nodes.
func TestSimulationMatchesTheRealScheduler(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	bindSimulator(ctx, t, h)

	workload := filepath.Join(t.TempDir(), "trace.yaml")
	if err := os.WriteFile(workload, traceManifests(t, ns), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runOn(h, simulator, workload, "--schedulers", "lockstep", "--job-details", "-o", "json")
	if err != nil {
		t.Fatalf("lockstep simulate: %v\n%s", err, stderr)
	}
	var r simreport.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("decoding -o json: %v\n%s", err, out)
	}
	var simulated []string
	details := slices.Clone(r.Schedulers[0].JobDetails)
	sort.Slice(details, func(i, j int) bool { return details[i].StartOrder < details[j].StartOrder })
	for _, j := range details {
		nodes := slices.Clone(j.Nodes)
		sort.Strings(nodes)
		simulated = append(simulated, fmt.Sprintf("%d %s on %s", j.StartOrder, strings.TrimPrefix(j.Job, "Job "+ns+"/"), strings.Join(nodes, ",")))
	}

	h.OneGPUTemplate(ctx, t, ns)
	start := time.Now()
	for _, tj := range trace {
		time.Sleep(time.Until(start.Add(tj.arrival)))
		if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, realJob(ns, tj), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	real := waitStarted(ctx, t, h, ns)
	if diff := cmp.Diff(simulated, real); diff != "" {
		t.Errorf("jobs' start order and nodes (-simulated,+real):\n%s", diff)
	}
	t.Logf("simulated and real: %v", real)
}

func podTemplate(tj traceJob) *corev1.Pod {
	return builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").
		Annotation("sim.lockstep.dev/succeed-after", tj.runtime.String()).Obj()
}

func realJob(ns string, tj traceJob) *batchv1.Job {
	return builders.IndexedJob(ns, tj.name, tj.ranks, podTemplate(tj))
}

// traceManifests are the trace as `lockstep simulate` reads it: the claim
// template and the Jobs, with their arrival and runtime annotations.
func traceManifests(t *testing.T, ns string) []byte {
	t.Helper()
	tmpl := builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1)
	tmpl.TypeMeta = metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"}
	docs := []any{tmpl}
	for _, tj := range trace {
		j := realJob(ns, tj)
		j.TypeMeta = metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"}
		j.Annotations = map[string]string{simworkload.ArrivalAnnotation: tj.arrival.String(), simworkload.RuntimeAnnotation: tj.runtime.String()}
		docs = append(docs, j)
	}
	var b []byte
	for _, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, "---\n"...), y...)
	}
	return b
}

// waitStarted waits until every job of the trace has run all its pods,
// and says in which order they started (by the last of a job's pods to be
// scheduled) and on which nodes.
func waitStarted(ctx context.Context, t *testing.T, h *harness.Harness, ns string) []string {
	t.Helper()
	type started struct {
		name  string
		at    time.Time
		nodes []string
	}
	var got []started
	harness.Eventually(t, ctx, "every job of the trace started whole", func(ctx context.Context) (bool, string, error) {
		got = nil
		for _, tj := range trace {
			pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + tj.name})
			if err != nil {
				return false, "", err
			}
			s := started{name: tj.name}
			for _, p := range pods.Items {
				if p.Spec.NodeName == "" {
					continue
				}
				s.nodes = append(s.nodes, p.Spec.NodeName)
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(s.at) {
						s.at = c.LastTransitionTime.Time
					}
				}
			}
			if len(s.nodes) != int(tj.ranks) {
				return false, fmt.Sprintf("%s: %d of %d pods placed", tj.name, len(s.nodes), tj.ranks), nil
			}
			got = append(got, s)
		}
		return true, "", nil
	})
	sort.SliceStable(got, func(i, j int) bool { return got[i].at.Before(got[j].at) })
	var out []string
	for i, s := range got {
		sort.Strings(s.nodes)
		out = append(out, fmt.Sprintf("%d %s on %s", i+1, s.name, strings.Join(s.nodes, ",")))
	}
	return out
}
