package jobintegration_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
)

// TestKueueHeld: a Job suspended while it names a Kueue LocalQueue waits
// for Kueue's admission in that queue's ClusterQueue; one suspended by
// hand, or running, waits for nothing Kueue decides.
func TestKueueHeld(t *testing.T) {
	cq := func(ns, name string) (string, error) { return "gpus", nil }
	cases := map[string]struct {
		suspended bool
		labels    map[string]string
		want      string
	}{
		"suspended by Kueue": {
			suspended: true, labels: map[string]string{"kueue.x-k8s.io/queue-name": "team"},
			want: "waiting for Kueue admission in ClusterQueue gpus (LocalQueue ml/team)",
		},
		"suspended, in no queue": {suspended: true},
		"admitted (running)":     {labels: map[string]string{"kueue.x-k8s.io/queue-name": "team"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train", Labels: tc.labels}, Spec: batchv1.JobSpec{Suspend: ptr.To(tc.suspended)}}
			if diff := cmp.Diff(tc.want, jobintegration.KueueHeld(job.Integration{}.Wrap(j), cq)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
