package upstreamprofile

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-dev/lockstep/internal/preflight"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// With WorkloadWithJob on in kube-apiserver and kube-controller-manager,
// the Job probe sees the field kept and a Workload created for it, and
// leaves nothing behind.
func TestPreflightSeesInTreeGangServed(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 2*time.Minute)
	r, err := preflight.Run(ctx, h.Client, h.Dynamic, preflight.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]preflight.Check{}
	for _, c := range r.Checks {
		checks[c.Name] = c
	}
	if d := checks["scheduling.k8s.io/v1beta1 (in-tree gang API)"].Detail; !strings.HasPrefix(d, "served") {
		t.Errorf("gang API on the upstream profile: want served, got %q", d)
	}
	if c := checks[preflight.CheckJobField]; c.Status != preflight.Info || !strings.Contains(c.Detail, "kube-controller-manager created Workload") {
		t.Errorf("Job field on the upstream profile: want kept and a Workload created, got %+v", c)
	}
	harness.Eventually(t, ctx, "the probe Job and its Workload deleted", func(ctx context.Context) (bool, string, error) {
		jobs, err := h.Client.BatchV1().Jobs(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: preflight.ProbeLabel})
		if err != nil {
			return false, "", err
		}
		wl, err := h.Dynamic.Resource(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "workloads"}).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(jobs.Items) == 0 && len(wl.Items) == 0, fmt.Sprintf("%d probe Jobs, %d Workloads", len(jobs.Items), len(wl.Items)), nil
	})
}
