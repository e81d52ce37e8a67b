//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestWebhookPodCreationRate creates the pods of a 1,024-rank Lockstep Job
// with Lockstep's webhooks in the path and with them removed, interleaved,
// three times each, and prints the pod-creation rates side by side (time
// from the Job's creation to its 1,024th pod). Rejections fail the test;
// time never does.
func TestWebhookPodCreationRate(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 20*time.Minute)
	mut, err := h.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	val, err := h.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "lockstep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rates := map[bool][]float64{}
	for round := 0; round < 3; round++ {
		for _, webhook := range []bool{true, false} {
			if !webhook {
				removeWebhooks(t, ctx, h)
			}
			rate, rejected := createJobPods(t, ctx, h, fmt.Sprintf("rate-%d-%v", round, webhook), 1024)
			if !webhook {
				restoreWebhooks(t, ctx, h, mut, val)
			}
			if rejected > 0 {
				t.Errorf("round %d (webhook %v): %d pod creations rejected", round, webhook, rejected)
			}
			rates[webhook] = append(rates[webhook], rate)
			t.Logf("round %d, webhook %-5v: %.0f pods/s", round, webhook, rate)
		}
	}
	with, without := median(rates[true]), median(rates[false])
	host, _ := os.Hostname()
	fmt.Printf("\nPod creation of a 1,024-rank Lockstep Job (median of 3, interleaved; %s, %d CPUs):\n", host, runtime.NumCPU())
	fmt.Printf("  with Lockstep's webhooks   %6.0f pods/s\n  webhooks removed           %6.0f pods/s\n  ratio                      %5.0f %%\n\n", with, without, 100*with/without)
}

// createJobPods creates a Job of n ranks in a fresh namespace and returns
// the rate at which its pods appeared and how many creations failed.
func createJobPods(t *testing.T, ctx context.Context, h *harness.Harness, name string, n int32) (float64, int) {
	t.Helper()
	ns := h.Namespace(t)
	job := builders.IndexedJob(ns, name, n, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	// An informer counts the pods as they are created, without loading the
	// API server the way polling LISTs of 1,024 pods would.
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
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("%d of %d pods: %v", seen.Load(), n, ctx.Err())
	}
	rate := float64(n) / time.Since(start).Seconds()
	evs, _ := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	// Let the round's pods go before the next round is measured.
	_ = h.Client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(pods.Items) == 0, nil
	})
	return rate, len(evs.Items)
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
