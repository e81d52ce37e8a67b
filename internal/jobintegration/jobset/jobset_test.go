package jobset

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

func lockstepPod() *corev1.Pod { return builders.MakePod().Scheduler(lockv1.SchedulerName).Obj() }

func trainer() *jobsetv1.JobSet {
	return builders.JobSet("team-a", "train",
		builders.ReplicatedJob("driver", 1, 1, lockstepPod()),
		builders.ReplicatedJob("workers", 2, 4, lockstepPod()))
}

func TestGroups(t *testing.T) {
	cases := map[string]struct {
		js      func(*jobsetv1.JobSet)
		want    []jobintegration.Group
		wantErr string
	}{
		"one gang of every pod of every replicated job": {
			js:   func(*jobsetv1.JobSet) {},
			want: []jobintegration.Group{{Name: "train", Template: jobintegration.TemplateName, MinCount: 9, Size: 9, Roles: []string{"driver", "workers"}}},
		},
		"min-count lowers the one gang": {
			js:   func(js *jobsetv1.JobSet) { js.Annotations = map[string]string{jobintegration.MinCountAnnotation: "5"} },
			want: []jobintegration.Group{{Name: "train", Template: jobintegration.TemplateName, MinCount: 5, Size: 9, Roles: []string{"driver", "workers"}}},
		},
		"gang-scope role: one gang per replicated job": {
			js: func(js *jobsetv1.JobSet) {
				js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeRole}
			},
			want: []jobintegration.Group{
				{Name: "train-driver", Template: "driver", MinCount: 1, Size: 1, Roles: []string{"driver"}},
				{Name: "train-workers", Template: "workers", MinCount: 8, Size: 8, Roles: []string{"workers"}},
			},
		},
		"replicated jobs that depend on each other are gangs of their own": {
			js: func(js *jobsetv1.JobSet) {
				js.Spec.ReplicatedJobs[1].DependsOn = []jobsetv1.DependsOn{{Name: "driver", Status: jobsetv1.DependencyReady}}
			},
			want: []jobintegration.Group{
				{Name: "train-driver", Template: "driver", MinCount: 1, Size: 1, Roles: []string{"driver"}},
				{Name: "train-workers", Template: "workers", MinCount: 8, Size: 8, Roles: []string{"workers"}},
			},
		},
		"one gang over replicated jobs started in order is refused": {
			js: func(js *jobsetv1.JobSet) {
				js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeJob}
				js.Spec.StartupPolicy = &jobsetv1.StartupPolicy{StartupPolicyOrder: jobsetv1.InOrder}
			},
			wantErr: "could never be placed",
		},
		"min-count with one gang per role is refused": {
			js: func(js *jobsetv1.JobSet) {
				js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeRole, jobintegration.MinCountAnnotation: "3"}
			},
			wantErr: "each role's gang needs all its pods",
		},
		"replicated jobs with different schedulers are refused": {
			js:      func(js *jobsetv1.JobSet) { js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.SchedulerName = "" },
			wantErr: `replicated job workers's pods name scheduler "lockstep", replicated job driver's ""`,
		},
		"a child Job that does not run all its pods at once is refused": {
			js:      func(js *jobsetv1.JobSet) { js.Spec.ReplicatedJobs[1].Template.Spec.Completions = ptr.To[int32](8) },
			wantErr: "completions (8) differs from parallelism (4)",
		},
		"roles of one gang with different priority classes are refused": {
			js: func(js *jobsetv1.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.PriorityClassName = "high"
			},
			wantErr: "different priority classes",
		},
		"a group name that is no label value is refused": {
			js: func(js *jobsetv1.JobSet) {
				js.Name = strings.Repeat("x", 60)
				js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: jobintegration.ScopeRole}
			},
			wantErr: "not a valid label value",
		},
		"a template naming its own group makes no gang of Lockstep's": {
			js: func(js *jobsetv1.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "mine"}
			},
			wantErr: "the pod template of replicated job driver names PodGroup mine; its pods join that group",
		},
		"nor one naming the API server's PodGroup (spec.schedulingGroup)": {
			js: func(js *jobsetv1.JobSet) {
				js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("upstream")}
			},
			wantErr: "the pod template of replicated job workers names PodGroup upstream",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := trainer()
			tc.js(js)
			got, err := jobintegration.Groups(Integration{}.Wrap(js))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error containing %q, got %v (groups %+v)", tc.wantErr, err, got)
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

// A pod belongs to a JobSet only through its controller chain: a child Job
// the JobSet controls. Labels alone claim nothing.
func TestOwnerOf(t *testing.T) {
	js := trainer()
	js.UID = "js-uid"
	child := builders.IndexedJob("team-a", "train-workers-0", 4, lockstepPod())
	child.UID = "child-uid"
	child.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "train", UID: "js-uid", Controller: ptr.To(true)}}
	stray := builders.IndexedJob("team-a", "stray", 4, lockstepPod())
	stray.UID = "stray-uid"
	scheme := podgroup.Scheme()
	if err := (Integration{}).AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(js, child, stray).Build()
	pod := func(job *batchv1.Job, labelled bool) *corev1.Pod {
		p := builders.MakePod().Namespace("team-a").Name("p").Obj()
		if job != nil {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}
		}
		if labelled {
			p.Labels = map[string]string{jobsetv1.JobSetNameKey: "train", jobsetv1.ReplicatedJobNameKey: "workers"}
		}
		return p
	}
	cases := map[string]struct {
		pod      *corev1.Pod
		wantName string
		wantUID  types.UID
	}{
		"a pod of the JobSet's child Job":       {pod: pod(child, true), wantName: "train", wantUID: "js-uid"},
		"labels without a controller":           {pod: pod(nil, true)},
		"labels on a pod of another Job":        {pod: pod(stray, true)},
		"a child Job's pod without the labels":  {pod: pod(child, false)},
		"a controller reference to a stale Job": {pod: func() *corev1.Pod { p := pod(child, true); p.OwnerReferences[0].UID = "old"; return p }()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, uid, err := Integration{}.OwnerOf(context.Background(), getter{c}, tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantName || uid != tc.wantUID {
				t.Errorf("got (%q, %q), want (%q, %q)", got, uid, tc.wantName, tc.wantUID)
			}
		})
	}
}

type getter struct{ c client.Client }

func (g getter) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	return g.c.Get(ctx, key, obj)
}
