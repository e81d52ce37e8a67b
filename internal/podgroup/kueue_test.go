package podgroup

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestKueueWaiting: a workload Kueue holds names the ClusterQueue it waits
// for; when that cannot be read, the LocalQueue, with why.
func TestKueueWaiting(t *testing.T) {
	localQueues := schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "localqueues"}
	cqs := func(ns, name string) (string, error) {
		switch name {
		case "team":
			return "gpus", nil
		case "infer":
			return "serving", nil
		case "unset":
			return "", nil
		case "secret":
			return "", apierrors.NewForbidden(localQueues, name, errors.New(`User "alice" cannot get resource "localqueues"`))
		}
		return "", apierrors.NewNotFound(localQueues, name)
	}
	cases := map[string]struct {
		queues []string
		cq     ClusterQueueOf
		want   string
	}{
		"the ClusterQueue its LocalQueue feeds": {
			queues: []string{"team"}, cq: cqs,
			want: "waiting for Kueue admission in ClusterQueue gpus (LocalQueue ml/team)",
		},
		"no way to read LocalQueues: the LocalQueue": {
			queues: []string{"team"},
			want:   "waiting for Kueue admission in LocalQueue ml/team",
		},
		"a LocalQueue that cannot be read: the LocalQueue, with why": {
			queues: []string{"secret"}, cq: cqs,
			want: `waiting for Kueue admission in LocalQueue ml/secret (its ClusterQueue could not be read: localqueues.kueue.x-k8s.io "secret" is forbidden: User "alice" cannot get resource "localqueues")`,
		},
		"a LocalQueue that does not exist: the fix": {
			queues: []string{"typo"}, cq: cqs,
			want: "waiting for Kueue admission in LocalQueue ml/typo, which does not exist: create it, or name an existing LocalQueue in the label kueue.x-k8s.io/queue-name",
		},
		"a LocalQueue without a ClusterQueue: the fix": {
			queues: []string{"unset"}, cq: cqs,
			want: "waiting for Kueue admission in LocalQueue ml/unset (it names no ClusterQueue: set its spec.clusterQueue)",
		},
		"pods naming two LocalQueues: both": {
			queues: []string{"infer", "team"}, cq: cqs,
			want: "waiting for Kueue admission in ClusterQueue serving (LocalQueue ml/infer) and in ClusterQueue gpus (LocalQueue ml/team)",
		},
		"no LocalQueue named": {
			cq: cqs, want: "waiting for Kueue admission",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, KueueWaiting("ml", tc.queues, tc.cq)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
