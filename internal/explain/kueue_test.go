package explain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// A Job Kueue keeps suspended is answered in the words of its PodGroup's
// Running condition, naming the ClusterQueue whose admission it waits for;
// one suspended by hand as before.
func TestExplainJobKueueHolds(t *testing.T) {
	cq := func(ns, name string) (string, error) { return "gpus", nil }
	for name, tc := range map[string]struct {
		labels map[string]string
		want   string
	}{
		"held by Kueue": {
			labels: map[string]string{podgroup.KueueQueueLabel: "team"},
			want:   "Job ml/train has no pods: Job train is suspended, waiting for Kueue admission in ClusterQueue gpus (LocalQueue ml/team); nothing is scheduled until Kueue admits it",
		},
		"suspended by hand": {
			want: "Job ml/train has no pods: Job train is suspended (e.g. held by a queue such as Kueue); nothing is scheduled until it is resumed",
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train", Labels: tc.labels}, Spec: batchv1.JobSpec{Suspend: ptr.To(true)}}
			u := &unit{Unit: &podgroup.Unit{}, label: "Job ml/train", owner: job.Integration{}.Wrap(j)}
			if diff := cmp.Diff(tc.want, notScheduledAnswer(u, nil, cq)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
