package kubeflow

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kfv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

func replica(n int32) *kfv1.ReplicaSpec {
	return &kfv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: lockv1.SchedulerName}}}
}

func pytorch(master, workers int32) *kfv1.PyTorchJob {
	return &kfv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "job-uid"},
		Spec: kfv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kfv1.ReplicaType]*kfv1.ReplicaSpec{
			kfv1.PyTorchJobReplicaTypeMaster: replica(master), kfv1.PyTorchJobReplicaTypeWorker: replica(workers),
		}},
	}
}

func TestGroups(t *testing.T) {
	withPolicy := func(sp *kfv1.SchedulingPolicy) *kfv1.PyTorchJob {
		j := pytorch(1, 3)
		j.Spec.RunPolicy.SchedulingPolicy = sp
		return j
	}
	elastic := pytorch(0, 4)
	delete(elastic.Spec.PyTorchReplicaSpecs, kfv1.PyTorchJobReplicaTypeMaster)
	elastic.Spec.ElasticPolicy = &kfv1.ElasticPolicy{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](8)}
	elasticMaster := pytorch(1, 3)
	elasticMaster.Spec.ElasticPolicy = &kfv1.ElasticPolicy{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](8)}
	fixed := pytorch(1, 3)
	fixed.Spec.ElasticPolicy = &kfv1.ElasticPolicy{MinReplicas: ptr.To[int32](3), MaxReplicas: ptr.To[int32](3)}
	root := &jobintegration.Composite{Name: "train", MinGroupCount: 2}
	annotated := withPolicy(&kfv1.SchedulingPolicy{MinAvailable: ptr.To[int32](2)})
	annotated.Annotations = map[string]string{jobintegration.MinCountAnnotation: "3"}
	mixed := pytorch(1, 3)
	mixed.Spec.PyTorchReplicaSpecs[kfv1.PyTorchJobReplicaTypeWorker].Template.Spec.SchedulerName = "default-scheduler"
	tf := &kfv1.TFJob{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: kfv1.TFJobSpec{TFReplicaSpecs: map[kfv1.ReplicaType]*kfv1.ReplicaSpec{
		kfv1.TFJobReplicaTypeWorker: replica(4), kfv1.TFJobReplicaTypePS: replica(2), kfv1.TFJobReplicaTypeChief: replica(1),
	}}}
	for name, tc := range map[string]struct {
		kind    *Kind
		job     client.Object
		want    []jobintegration.Group
		wantErr string
	}{
		"every replica, master first": {kind: PyTorchJob, job: pytorch(1, 3),
			want: []jobintegration.Group{{Name: "train", Template: jobintegration.TemplateName, MinCount: 4, Size: 4, Roles: []string{"master", "worker"}}}},
		// A flat gang of "any 2 of 4" could start without the master.
		"minAvailable below the size: the master in full beside the workers' rest": {kind: PyTorchJob, job: withPolicy(&kfv1.SchedulingPolicy{MinAvailable: ptr.To[int32](2)}),
			want: []jobintegration.Group{
				{Name: "train-master", Template: "master", MinCount: 1, Size: 1, Roles: []string{"master"}, Parent: root},
				{Name: "train-worker", Template: "worker", MinCount: 1, Size: 3, Roles: []string{"worker"}, Parent: root}}},
		"minAvailable of every pod: one flat gang": {kind: PyTorchJob, job: withPolicy(&kfv1.SchedulingPolicy{MinAvailable: ptr.To[int32](4)}),
			want: []jobintegration.Group{{Name: "train", Template: jobintegration.TemplateName, MinCount: 4, Size: 4, Roles: []string{"master", "worker"}}}},
		"an elastic job with a master: a tree": {kind: PyTorchJob, job: elasticMaster,
			want: []jobintegration.Group{
				{Name: "train-master", Template: "master", MinCount: 1, Size: 1, Roles: []string{"master"}, Parent: root},
				{Name: "train-worker", Template: "worker", MinCount: 2, Size: 3, Roles: []string{"worker"}, Parent: root}}},
		"an elastic job of a fixed size: one flat gang": {kind: PyTorchJob, job: fixed,
			want: []jobintegration.Group{{Name: "train", Template: jobintegration.TemplateName, MinCount: 4, Size: 4, Roles: []string{"master", "worker"}}}},
		"the annotation overrides minAvailable": {kind: PyTorchJob, job: annotated,
			want: []jobintegration.Group{{Name: "train", Template: jobintegration.TemplateName, MinCount: 3, Size: 4, Roles: []string{"master", "worker"}}}},
		"an elastic job needs its minReplicas workers": {kind: PyTorchJob, job: elastic,
			want: []jobintegration.Group{{Name: "train", Template: jobintegration.TemplateName, MinCount: 2, Size: 4, Roles: []string{"worker"}}}},
		"chief first, then by type": {kind: TFJob, job: tf,
			want: []jobintegration.Group{{Name: "tf", Template: jobintegration.TemplateName, MinCount: 7, Size: 7, Roles: []string{"chief", "ps", "worker"}}}},
		"minAvailable above the job's size":    {kind: PyTorchJob, job: withPolicy(&kfv1.SchedulingPolicy{MinAvailable: ptr.To[int32](5)}), wantErr: "not between 1 and its size (4)"},
		"replicas naming different schedulers": {kind: PyTorchJob, job: mixed, wantErr: `the worker pods name scheduler "default-scheduler"`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := jobintegration.Groups(tc.kind.Wrap(tc.job))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestValidateFieldsAndWarnings(t *testing.T) {
	j := pytorch(1, 3)
	j.Spec.PyTorchReplicaSpecs[kfv1.PyTorchJobReplicaTypeMaster].Template.Spec.PriorityClassName = "high"
	j.Spec.RunPolicy.SchedulingPolicy = &kfv1.SchedulingPolicy{PriorityClass: "high", Queue: "research", MinAvailable: ptr.To[int32](0)}
	errs := PyTorchJob.Wrap(j).(jobintegration.FieldValidator).ValidateFields()
	if len(errs) != 2 {
		t.Fatalf("errors %v, want minAvailable and priorityClass refused", errs)
	}
	if !strings.Contains(errs[1].Error(), `the worker pods' priorityClassName is ""`) {
		t.Errorf("priorityClass error %q does not name the workers' class", errs[1].Error())
	}
	j.Spec.PyTorchReplicaSpecs[kfv1.PyTorchJobReplicaTypeWorker].Template.Spec.PriorityClassName = "high"
	j.Spec.RunPolicy.SchedulingPolicy.MinAvailable = nil
	if errs := PyTorchJob.Wrap(j).(jobintegration.FieldValidator).ValidateFields(); len(errs) != 0 {
		t.Errorf("every pod has the policy's class: want no error, got %v", errs)
	}
	w := PyTorchJob.Wrap(j).(jobintegration.Warner).Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "queue") {
		t.Errorf("warnings %q, want one naming the Volcano queue", w)
	}
}

func TestStopped(t *testing.T) {
	for name, tc := range map[string]struct {
		suspend    bool
		conditions []kfv1.JobCondition
		why        string
		failed     bool
		suspended  bool
	}{
		"running":                 {conditions: []kfv1.JobCondition{{Type: kfv1.JobRunning, Status: corev1.ConditionTrue}}},
		"suspended":               {suspend: true, why: "suspended", suspended: true},
		"succeeded":               {conditions: []kfv1.JobCondition{{Type: kfv1.JobSucceeded, Status: corev1.ConditionTrue}}, why: "complete"},
		"failed":                  {conditions: []kfv1.JobCondition{{Type: kfv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}, why: "failed: BackoffLimitExceeded", failed: true},
		"was failing, restarting": {conditions: []kfv1.JobCondition{{Type: kfv1.JobFailed, Status: corev1.ConditionFalse}, {Type: kfv1.JobRestarting, Status: corev1.ConditionTrue}}},
	} {
		t.Run(name, func(t *testing.T) {
			j := pytorch(1, 1)
			j.Spec.RunPolicy.Suspend = ptr.To(tc.suspend)
			j.Status.Conditions = tc.conditions
			why, failed, suspended := PyTorchJob.Wrap(j).Stopped()
			if why != tc.why || failed != tc.failed || suspended != tc.suspended {
				t.Errorf("Stopped() = %q, %v, %v; want %q, %v, %v", why, failed, suspended, tc.why, tc.failed, tc.suspended)
			}
		})
	}
}

// A pod belongs to the job that controls it, of that kind only; its role
// is the replica type the operator labels it with.
func TestOwnerAndRole(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-worker-0",
		Labels:          map[string]string{kfv1.ReplicaTypeLabel: "worker"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "train", UID: "job-uid", Controller: ptr.To(true)}}}}
	name, uid, err := PyTorchJob.OwnerOf(context.Background(), nil, pod)
	if err != nil || name != "train" || uid != "job-uid" {
		t.Errorf("PyTorchJob.OwnerOf = %q, %q, %v; want train, job-uid", name, uid, err)
	}
	if name, _, _ := TFJob.OwnerOf(context.Background(), nil, pod); name != "" {
		t.Errorf("TFJob.OwnerOf claims a PyTorchJob's pod (%q)", name)
	}
	j := PyTorchJob.Wrap(pytorch(1, 3))
	groups, err := jobintegration.Groups(j)
	if err != nil {
		t.Fatal(err)
	}
	if g := jobintegration.GroupOf(j, groups, pod); g != "train" {
		t.Errorf("group %q, want train", g)
	}
}

// A minAvailable below the replicas beside the workers (a TFJob's chief
// and PS) would make a gang of any N pods that can start without them:
// refused, naming them; one that covers them (the tree keeps them whole)
// is not.
func TestMinAvailableBelowTheCoordinatorsIsRefused(t *testing.T) {
	tf := func(minAvailable int32) *kfv1.TFJob {
		return &kfv1.TFJob{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: kfv1.TFJobSpec{
			RunPolicy: kfv1.RunPolicy{SchedulingPolicy: &kfv1.SchedulingPolicy{MinAvailable: ptr.To(minAvailable)}},
			TFReplicaSpecs: map[kfv1.ReplicaType]*kfv1.ReplicaSpec{
				kfv1.TFJobReplicaTypeWorker: replica(4), kfv1.TFJobReplicaTypePS: replica(2), kfv1.TFJobReplicaTypeChief: replica(1),
			}}}
	}
	errs := TFJob.Wrap(tf(2)).(jobintegration.FieldValidator).ValidateFields()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "is below the job's 3 replicas beside its workers (chief: 1, ps: 2)") || !strings.Contains(errs[0].Error(), "at least 4") {
		t.Errorf("minAvailable 2 of chief 1 + PS 2 + 4 workers: %v", errs)
	}
	if errs := TFJob.Wrap(tf(5)).(jobintegration.FieldValidator).ValidateFields(); len(errs) != 0 {
		t.Errorf("minAvailable 5 covers the chief and PS: %v", errs)
	}
}
