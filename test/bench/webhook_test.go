//go:build bench

package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// workload is how a bench round's pods come to be.
type workload string

const (
	// byJob: the Job controller creates the ranks of a gang Job.
	byJob workload = "Job"
	// direct: a client creates the members of a PodGroup itself, 16 at a
	// time (an operator, a StatefulSet, kubectl apply).
	direct workload = "pods created directly"
)

// TestWebhookPodCreationRate measures pod creation with Lockstep's webhooks
// in the API server's path and with them removed, for gang Jobs of 200
// and 2,000 ranks (LOCKSTEP_BENCH_JOB_SIZES) and for 200 group members
// created directly (LOCKSTEP_BENCH_DIRECT_SIZES), in interleaved rounds (LOCKSTEP_BENCH_ROUNDS, default
// 3; the order of the two arms alternates), and prints the medians side by
// side with the pod-webhook calls the API server made per pod.
//
// Both arms create the same objects: a Job is created suspended with the
// webhooks in place — so its template carries what the Job mutation
// writes in both — then, webhooks removed or not, resumed; the time is from
// its resumption to its last pod's creation. Rejections fail the test;
// time never does.
func TestWebhookPodCreationRate(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 50*time.Minute)
	mut, err := h.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	val, err := h.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		w       workload
		n       int32
		webhook bool
	}
	type row struct {
		w workload
		n int32
	}
	var rows []row
	for _, n := range sizes(t, "LOCKSTEP_BENCH_JOB_SIZES", "200,2000") {
		rows = append(rows, row{byJob, n})
	}
	for _, n := range sizes(t, "LOCKSTEP_BENCH_DIRECT_SIZES", "200") {
		rows = append(rows, row{direct, n})
	}
	rates, calls, latency := map[key][]float64{}, map[key][]float64{}, map[key][]float64{}
	for round := 0; round < int(sizes(t, "LOCKSTEP_BENCH_ROUNDS", "3")[0]); round++ {
		for _, r := range rows {
			arms := []bool{true, false}
			if round%2 == 1 {
				arms = []bool{false, true}
			}
			for _, webhook := range arms {
				rate, perPod, ms := createPods(t, ctx, h, r.w, r.n, webhook, mut, val)
				k := key{r.w, r.n, webhook}
				rates[k], calls[k], latency[k] = append(rates[k], rate), append(calls[k], perPod), append(latency[k], ms)
				t.Logf("round %d, %s of %d, webhooks %-5v: %.0f pods/s, %.2f pod-webhook calls per pod (%.1f ms each)", round, r.w, r.n, webhook, rate, perPod, ms)
			}
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("\nPod creation with Lockstep's webhooks and with them removed (median of %d interleaved rounds; %s, %d CPUs):\n", len(rates[key{rows[0].w, rows[0].n, true}]), host, runtime.NumCPU())
	fmt.Printf("  %-28s %14s %10s %7s %18s %9s\n", "pods", "with (pods/s)", "without", "ratio", "webhook calls/pod", "ms/call")
	for _, r := range rows {
		with, without := median(rates[key{r.w, r.n, true}]), median(rates[key{r.w, r.n, false}])
		k := key{r.w, r.n, true}
		fmt.Printf("  %-28s %14.0f %10.0f %6.0f%% %18.2f %9.1f\n", fmt.Sprintf("%s, %d", r.w, r.n), with, without, 100*with/without, median(calls[k]), median(latency[k]))
	}
	fmt.Println()
}

// createPods creates n pods of workload w in a fresh namespace, with the
// webhooks or without them, and returns the pods created per second and
// the pod-webhook calls the API server made per pod and their mean
// latency as the API server saw it. The webhooks are in
// place again when it returns.
func createPods(t *testing.T, ctx context.Context, h *harness.Harness, w workload, n int32, webhook bool,
	mut *admissionv1.MutatingWebhookConfiguration, val *admissionv1.ValidatingWebhookConfiguration) (rate, callsPerPod, msPerCall float64) {
	t.Helper()
	ns := h.Namespace(t)
	name := "rate"
	// Made with the webhooks in place in both arms: the same objects.
	switch w {
	case byJob:
		job := builders.IndexedJob(ns, name, n, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
		job.Spec.Suspend = ptr.To(true)
		if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	case direct:
		h.CreatePodGroup(ctx, t, builders.GangPodGroup(ns, name, n))
	}
	if !webhook {
		removeWebhooks(t, ctx, h)
		defer restoreWebhooks(t, ctx, h, mut, val)
	}
	calls0, secs0 := podWebhookCalls(t, ctx, h)
	start := time.Now()
	var rejected int
	switch w {
	case byJob:
		rate, rejected = resumeJob(t, ctx, h, ns, name, n)
	case direct:
		rate, rejected = createMembers(t, ctx, h, ns, name, n)
	}
	calls1, secs1 := podWebhookCalls(t, ctx, h)
	callsPerPod = (calls1 - calls0) / float64(n)
	if calls1 > calls0 {
		msPerCall = 1000 * (secs1 - secs0) / (calls1 - calls0)
	}
	if rejected > 0 {
		t.Errorf("%s of %d (webhooks %v): %d pod creations rejected", w, n, webhook, rejected)
	}
	// Let the round's pods go before the next round is measured.
	if w == byJob {
		_ = h.Client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	}
	_ = h.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(pods.Items) == 0, nil
	})
	t.Logf("%s of %d took %s in all", w, n, time.Since(start).Round(time.Second))
	return rate, callsPerPod, msPerCall
}

// resumeJob resumes Job ns/name and returns the rate at which its n pods
// appeared (from the resumption to the last) and how many creations the
// Job controller saw fail.
func resumeJob(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, n int32) (float64, int) {
	t.Helper()
	// An informer counts the pods as they are created, without loading the
	// API server the way polling LISTs of 2,000 pods would.
	var seen atomic.Int64
	done := make(chan struct{})
	f := informers.NewSharedInformerFactoryWithOptions(h.Client, 0, informers.WithNamespace(ns))
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
		if seen.Add(1) == int64(n) {
			close(done)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	f.WaitForCacheSync(stop)
	start := time.Now()
	if _, err := h.Client.BatchV1().Jobs(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%d of %d pods: %v", seen.Load(), n, ctx.Err())
	}
	rate := float64(n) / time.Since(start).Seconds()
	evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	if err != nil {
		t.Fatal(err)
	}
	return rate, len(evs.Items)
}

// createMembers creates n members of PodGroup ns/group, 16 at a time, and
// returns the rate and how many creations failed.
func createMembers(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, n int32) (float64, int) {
	t.Helper()
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				pod := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Member(group).Obj()
				if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					if failed.Add(1) == 1 {
						t.Logf("creating pod %s: %v", pod.Name, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), int(failed.Load())
}

// podWebhookCalls is how many calls the API server has made to Lockstep's
// pod webhooks and the seconds they took in all
// (apiserver_admission_webhook_admission_duration_seconds).
func podWebhookCalls(t *testing.T, ctx context.Context, h *harness.Harness) (calls, seconds float64) {
	t.Helper()
	raw, err := h.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing the API server's metrics: %v", err)
	}
	if f, ok := families["apiserver_admission_webhook_admission_duration_seconds"]; ok {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && strings.HasPrefix(l.GetValue(), "pods.") && strings.HasSuffix(l.GetValue(), ".scheduling.lockstep.dev") {
					calls += float64(m.GetHistogram().GetSampleCount())
					seconds += m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return calls, seconds
}

// sizes are the comma-separated numbers of environment variable env, def
// when it is unset, none when it is "none".
func sizes(t *testing.T, env, def string) []int32 {
	t.Helper()
	s := os.Getenv(env)
	if s == "" {
		s = def
	}
	var out []int32
	if s == "none" {
		return nil
	}
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || v < 1 {
			t.Fatalf("%s=%q: want positive numbers separated by commas", env, s)
		}
		out = append(out, int32(v))
	}
	return out
}

func removeWebhooks(t *testing.T, ctx context.Context, h *harness.Harness) {
	t.Helper()
	if err := h.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "lockstep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "lockstep", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the API server's webhook configuration cache
}

func restoreWebhooks(t *testing.T, ctx context.Context, h *harness.Harness, mut *admissionv1.MutatingWebhookConfiguration, val *admissionv1.ValidatingWebhookConfiguration) {
	t.Helper()
	m, v := mut.DeepCopy(), val.DeepCopy()
	m.ResourceVersion, v.ResourceVersion = "", ""
	if _, err := h.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
