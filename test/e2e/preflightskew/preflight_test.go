package preflightskew

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-dev/lockstep/internal/preflight"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestPreflightFailsWhenOnlyTheAPIServerHasWorkloadWithJob(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, filepath.Join(h.BinDir, "lockstep"), "preflight", "--kubeconfig", h.Kubeconfig, "-o", "json", "--probe-timeout", "10s")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("want exit code 1 (a Job's gang would be scheduled pod by pod), got %v; stderr: %s", err, errOut.String())
	}
	var r preflight.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("decoding -o json: %v\n%s", err, out.String())
	}
	var job preflight.Check
	for _, c := range r.Checks {
		if c.Name == preflight.CheckJobField {
			job = c
		}
	}
	if job.Status != preflight.Fail || !strings.Contains(job.Detail, "kube-controller-manager created no Workload") || !strings.Contains(job.Fix, "kube-controller-manager") {
		t.Errorf("Job field check: want a failure naming kube-controller-manager, got %+v", job)
	}
	got := map[string]string{}
	for _, f := range r.DRAFeatures {
		got[f.Gate] = f.Cluster
	}
	want := map[string]string{
		"DRADeviceTaintRules": preflight.Served, "DRADeviceTaints": preflight.Served, "ResourceHealthStatus": preflight.NotServed,
		"DRAPartitionableDevices": preflight.NotServed, "DRAConsumableCapacity": preflight.NotServed, "DRADeviceBindingConditions": preflight.NotServed,
		"DRAExtendedResource": preflight.Served,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DRA features of this API server (-want,+got):\n%s", diff)
	}
	assertProbeGone(t, ctx, h)
}

// assertProbeGone: the probe Job was deleted, and nothing it could own is left.
func assertProbeGone(t *testing.T, ctx context.Context, h *harness.Harness) {
	t.Helper()
	harness.Eventually(t, ctx, "the probe Job deleted", func(ctx context.Context) (bool, string, error) {
		jobs, err := h.Client.BatchV1().Jobs(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: preflight.ProbeLabel})
		if err != nil {
			return false, "", err
		}
		wl, err := h.Dynamic.Resource(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "workloads"}).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(jobs.Items) == 0 && len(wl.Items) == 0, fmt.Sprintf("%d Jobs, %d Workloads", len(jobs.Items), len(wl.Items)), nil
	})
}
