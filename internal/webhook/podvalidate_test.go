package webhook

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func validator(objs ...client.Object) *PodValidator {
	c := fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(objs...).
		Build()
	r := testReads(c)
	return &PodValidator{reads: r, Claims: &claimChecks{reads: r, Devices: newDeviceIndex(c, nil)}}
}

func newMember(name, group string, prio int32, class string) *corev1.Pod {
	p := builders.MakePod().Namespace("team-a").Name(name).Member(group).Obj()
	p.UID = types.UID(name)
	p.Spec.Priority = ptr.To(prio)
	p.Spec.PriorityClassName = class
	return p
}

func ownedBy(p *corev1.Pod, job *batchv1.Job) *corev1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
	return p
}

func TestPodValidatorCreate(t *testing.T) {
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000}
	team := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Value: 10000}
	elevated := builders.GangPodGroup("team-a", "elevated", 2)
	elevated.Spec.PriorityClassName = high.Name
	plain := builders.GangPodGroup("team-a", "plain", 2)
	gangJob := builders.IndexedJob("team-a", "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	gangJob.UID = "job-uid"
	jobGroup := builders.GangPodGroup("team-a", "train", 2)
	jobGroup.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}}
	other := builders.IndexedJob("team-a", "other", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	other.UID = "other-uid"
	// A JobSet gang: its child Job's pods carry the JobSet's labels.
	js := builders.JobSet("team-a", "trainer", builders.ReplicatedJob("workers", 1, 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()))
	js.UID = "js-uid"
	jsGroup := builders.GangPodGroup("team-a", "trainer", 2)
	jsGroup.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "trainer", UID: "js-uid", Controller: ptr.To(true)}}
	child := builders.IndexedJob("team-a", "trainer-workers-0", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Member("trainer").Obj())
	child.UID = "child-uid"
	child.OwnerReferences = jsGroup.OwnerReferences
	jsPod := func(group string, job *batchv1.Job) *corev1.Pod {
		p := ownedBy(newMember("p", group, 0, ""), job)
		p.Labels["jobset.sigs.k8s.io/jobset-name"] = "trainer"
		p.Labels["jobset.sigs.k8s.io/replicatedjob-name"] = "workers"
		return p
	}
	cases := map[string]struct {
		objs    []client.Object
		pod     *corev1.Pod
		wantErr []string
	}{
		"a JobSet's pod joins its gang": {
			objs: []client.Object{js, jsGroup, child}, pod: jsPod("trainer", child),
		},
		"a JobSet's pod cannot be put in another group": {
			objs: []client.Object{js, jsGroup, child, plain}, pod: jsPod("plain", child),
			wantErr: []string{"a pod of JobSet trainer joins only that JobSet's PodGroup (trainer), not \"plain\""},
		},
		"a pod with a JobSet's labels but another Job cannot join the JobSet's gang": {
			objs: []client.Object{js, jsGroup, child, gangJob}, pod: jsPod("trainer", gangJob),
			wantErr: []string{"a pod of Job train joins only that Job's PodGroup (train), not \"trainer\""},
		},
		"a bare pod cannot join a JobSet's gang": {
			objs: []client.Object{js, jsGroup}, pod: newMember("p", "trainer", 0, ""),
			wantErr: []string{"PodGroup trainer is the gang of JobSet trainer: only that JobSet's pods join it"},
		},
		"a class-less pod cannot join a group that names a higher class": {
			objs: []client.Object{high, elevated}, pod: newMember("p", "elevated", 0, ""),
			wantErr: []string{"spec.priorityClassName", "priority 0 differs from PodGroup elevated's priorityClassName system-cluster-critical (2000000000)", "set priorityClassName: system-cluster-critical on the pod"},
		},
		"a pod with the group's class joins it": {
			objs: []client.Object{high, elevated}, pod: newMember("p", "elevated", 2000000000, high.Name),
		},
		"a pod whose priority differs from the other members' is refused": {
			objs: []client.Object{team, plain, newMember("first", "plain", 10000, "team")}, pod: newMember("p", "plain", 0, ""),
			wantErr: []string{"priority 0 differs from the priority 10000 of PodGroup plain's other members (pod first"},
		},
		"a pod with the members' priority joins": {
			objs: []client.Object{team, plain, newMember("first", "plain", 10000, "team")}, pod: newMember("p", "plain", 10000, "team"),
		},
		"a finished member does not count": {
			objs: []client.Object{plain, func() *corev1.Pod {
				p := newMember("done", "plain", 10000, "team")
				p.Status.Phase = corev1.PodSucceeded
				return p
			}()},
			pod: newMember("p", "plain", 0, ""),
		},
		"a bare pod cannot join a Job's gang": {
			objs: []client.Object{gangJob, jobGroup}, pod: newMember("p", "train", 0, ""),
			wantErr: []string{"metadata.labels[scheduling.lockstep.dev/pod-group]", "PodGroup train is the gang of Job train: only that Job's pods join it"},
		},
		"a pod of another Job cannot join a Job's gang": {
			objs: []client.Object{gangJob, jobGroup, other}, pod: ownedBy(newMember("p", "train", 0, ""), other),
			wantErr: []string{"a pod of Job other joins only that Job's PodGroup (other), not \"train\""},
		},
		"a Job's pod joins its own gang": {
			objs: []client.Object{gangJob, jobGroup}, pod: ownedBy(newMember("p", "train", 0, ""), gangJob),
		},
		// Issue 28, finding 8: a group of a gang job's name that it does
		// not control is not its gang.
		"a gang Job's pod cannot join a group of its name made before the Job": {
			objs: []client.Object{gangJob, builders.GangPodGroup("team-a", "train", 2)}, pod: ownedBy(newMember("p", "train", 0, ""), gangJob),
			wantErr: []string{"PodGroup train has no controller (it was created before Job train), so it is not that Job's gang and Lockstep never adopts it: delete PodGroup train"},
		},
		"a gang Job's pod cannot join a JobSet's gang of its name": {
			objs:    []client.Object{gangJob, builders.MakePodGroup().Namespace("team-a").Name("train").MinCount(2).ControlledBy("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "js-uid").Obj()},
			pod:     ownedBy(newMember("p", "train", 0, ""), gangJob),
			wantErr: []string{"PodGroup train is the gang of JobSet train, not of Job train: give one of them another name"},
		},
		"a gang Job's pod waits for an earlier Job's group to go": {
			objs:    []client.Object{gangJob, builders.MakePodGroup().Namespace("team-a").Name("train").MinCount(2).ControlledBy("batch/v1", "Job", "train", "old-uid").Obj()},
			pod:     ownedBy(newMember("p", "train", 0, ""), gangJob),
			wantErr: []string{"PodGroup train belongs to an earlier Job train (uid old-uid) and is deleted with it"},
		},
		"a pod of a Job naming a group joins the user's group": {
			objs: []client.Object{plain, func() *batchv1.Job {
				j := builders.IndexedJob("team-a", "named", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Member("plain").Obj())
				j.UID = "named-uid"
				return j
			}()},
			pod: ownedBy(newMember("p", "plain", 0, ""), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "named", UID: "named-uid"}}),
		},
		"a gang Job's pod cannot be put in another group": {
			objs: []client.Object{gangJob, jobGroup, plain}, pod: ownedBy(newMember("p", "plain", 0, ""), gangJob),
			wantErr: []string{"a pod of Job train joins only that Job's PodGroup (train), not \"plain\""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := validator(tc.objs...)
			_, err := v.ValidateCreate(context.Background(), tc.pod)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("want admitted, got %v", err)
				}
				return
			}
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("want an error containing %q, got %v", want, err)
				}
			}
		})
	}
}

func TestPodValidatorUpdateKeepsMembership(t *testing.T) {
	v := validator()
	labelled := newMember("p", "a", 0, "")
	unlabelled := builders.MakePod().Namespace("team-a").Name("p").Scheduler(lockv1.SchedulerName).Obj()
	cases := map[string]struct {
		old, new *corev1.Pod
		refused  bool
	}{
		"label removed": {labelled, unlabelled, true},
		"label added":   {unlabelled, labelled, true},
		"label changed": {labelled, newMember("p", "b", 0, ""), true},
		"other labels change": {labelled, func() *corev1.Pod {
			p := labelled.DeepCopy()
			p.Labels["team"] = "x"
			return p
		}(), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.ValidateUpdate(context.Background(), tc.old, tc.new)
			if got := err != nil; got != tc.refused {
				t.Fatalf("refused: want %v, got %v (%v)", tc.refused, got, err)
			}
			if tc.refused && !strings.Contains(err.Error(), "fixed when it is created") {
				t.Errorf("want the reason, got %v", err)
			}
		})
	}
}

func TestPodGroupPriorityMustMatchMembers(t *testing.T) {
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	c := fake.NewClientBuilder().WithScheme(podgroup.Scheme()).WithObjects(high, newMember("first", "g", 0, "")).
		Build()
	v := &PodGroupValidator{reads: testReads(c)}
	pg := builders.GangPodGroup("team-a", "g", 2)
	pg.Spec.PriorityClassName = "high"
	_, err := v.ValidateCreate(context.Background(), pg)
	if err == nil || !strings.Contains(err.Error(), "its members have priority 0 (pod first") {
		t.Errorf("want the group refused for naming a priority its members do not have, got %v", err)
	}
}
