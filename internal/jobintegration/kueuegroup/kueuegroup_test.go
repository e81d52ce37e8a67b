package kueuegroup

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/go-cmp/cmp"
	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// member is a Lockstep pod in Kueue group g of total count, created age
// seconds after the epoch.
func member(name, g, total string, age int) *builders.PodWrapper {
	w := builders.MakePod().Namespace("team-a").Name(name).Scheduler(lockv1.SchedulerName).Label(GroupNameLabel, g).Member(g)
	if total != "" {
		w.Annotation(TotalCountAnnotation, total)
	}
	w.Obj().UID = types.UID(name + "-uid")
	w.Obj().CreationTimestamp = metav1.NewTime(time.Unix(int64(age), 0))
	return w
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want []string // substrings of the errors, in order
	}{
		"no Kueue group":              {pod: builders.MakePod().Obj()},
		"a readable group":            {pod: member("p", "train", "4", 0).Obj()},
		"no total count":              {pod: member("p", "train", "", 0).Obj(), want: []string{"pod-group-total-count]: Required"}},
		"a zero count":                {pod: member("p", "train", "0", 0).Obj(), want: []string{"not a positive integer"}},
		"a count not a number":        {pod: member("p", "train", "four", 0).Obj(), want: []string{"not a positive integer"}},
		"a name no PodGroup can have": {pod: member("p", "Train_A", "4", 0).Obj(), want: []string{"a lowercase RFC 1123 subdomain"}},
		"a bad disruption mode":       {pod: member("p", "train", "4", 0).Annotation(jobintegration.DisruptionModeAnnotation, "some").Obj(), want: []string{"not a disruption mode"}},
		"single":                      {pod: member("p", "train", "4", 0).Annotation(jobintegration.DisruptionModeAnnotation, "single").Obj()},
		"a job's min-count":           {pod: member("p", "train", "4", 0).Annotation(jobintegration.MinCountAnnotation, "2").Obj(), want: []string{"min-count]: Forbidden: shapes a job's gang, not Kueue pod group \"train\"'s"}},
		"a job's gang scope":          {pod: member("p", "train", "4", 0).Annotation(jobintegration.GangScopeAnnotation, "job").Obj(), want: []string{"gang-scope]: Forbidden"}},
	} {
		t.Run(name, func(t *testing.T) {
			errs := Validate(tc.pod)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want %d errors", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d: %q does not say %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}

func TestShapeOf(t *testing.T) {
	all := &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}}
	single := &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	deleted := member("c", "train", "6", 3).Obj()
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Unix(10, 0)}
	finished := member("d", "train", "6", 4).Obj()
	finished.Status.Phase = corev1.PodSucceeded
	for name, tc := range map[string]struct {
		group      string // "train" if empty
		pods       []*corev1.Pod
		ok         bool
		minCount   int32
		mode       *lockv1.DisruptionMode
		ownerNames []string
	}{
		"no pods": {},
		"a group of four": {
			pods: []*corev1.Pod{member("a", "train", "4", 1).Obj(), member("b", "train", "4", 2).Obj()},
			ok:   true, minCount: 4, mode: all, ownerNames: []string{"a", "b"},
		},
		"the newest live member's count rules (a scaled StatefulSet's new pods)": {
			pods: []*corev1.Pod{member("b", "train", "5", 2).Obj(), member("a", "train", "3", 1).Obj(), deleted, finished},
			ok:   true, minCount: 5, mode: all, ownerNames: []string{"a", "b", "c", "d"},
		},
		"a serving group is disrupted pod by pod": {
			group: "serve",
			pods:  []*corev1.Pod{member("a", "serve", "3", 1).Annotation(ServingAnnotation, "true").Obj()},
			ok:    true, minCount: 3, mode: single, ownerNames: []string{"a"},
		},
		"the annotation overrides a serving group's default": {
			group: "serve",
			pods:  []*corev1.Pod{member("a", "serve", "3", 1).Annotation(ServingAnnotation, "true").Annotation(jobintegration.DisruptionModeAnnotation, "all").Obj()},
			ok:    true, minCount: 3, mode: all, ownerNames: []string{"a"},
		},
		"single by annotation": {
			pods: []*corev1.Pod{member("a", "train", "2", 1).Annotation(jobintegration.DisruptionModeAnnotation, "single").Obj()},
			ok:   true, minCount: 2, mode: single, ownerNames: []string{"a"},
		},
		"pods not in the group are not members": {
			pods: []*corev1.Pod{
				member("a", "train", "2", 1).Obj(),
				member("other", "other", "2", 5).Obj(),                                     // another group
				builders.MakePod().Name("kueue-only").Label(GroupNameLabel, "train").Obj(), // not Lockstep's
				member("unread", "train", "", 6).Obj(),                                     // no count: refused at admission
				member("elsewhere", "train", "9", 7).Member("job-gang").Obj(),              // in an integration's gang
			},
			ok: true, minCount: 2, mode: all, ownerNames: []string{"a"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			group := tc.group
			if group == "" {
				group = "train"
			}
			s, ok := ShapeOf(group, tc.pods)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if s.MinCount != tc.minCount {
				t.Errorf("minCount %d, want %d", s.MinCount, tc.minCount)
			}
			if (s.Mode.All != nil) != (tc.mode.All != nil) {
				t.Errorf("mode %+v, want %+v", s.Mode, tc.mode)
			}
			var names []string
			for _, o := range s.Owners {
				if o.Kind != "Pod" || o.APIVersion != "v1" || o.UID != types.UID(o.Name+"-uid") || o.Controller != nil {
					t.Errorf("owner %+v: want a non-controller reference to the pod", o)
				}
				names = append(names, o.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.ownerNames, ",") {
				t.Errorf("owners %v, want %v", names, tc.ownerNames)
			}
		})
	}
}

func TestPodGroup(t *testing.T) {
	s := Shape{MinCount: 3, Mode: &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}}, Owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "a", UID: "a"}}}
	pg := PodGroup("team-a", "train", s, false)
	if pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount != 3 || !Ours(pg) || pg.Labels[SourceLabel] != "train" || len(pg.OwnerReferences) != 1 {
		t.Errorf("gang PodGroup: %+v", pg)
	}
	if pg.Spec.WorkloadRef != nil || pg.Spec.PriorityClassName != "" || pg.Spec.Priority != nil {
		t.Errorf("a Kueue group's PodGroup has no Workload and no priority of its own (its members' is its): %+v", pg.Spec)
	}
	if basic := PodGroup("team-a", "train", s, true); basic.Spec.SchedulingPolicy.Basic == nil || basic.Spec.SchedulingPolicy.Gang != nil {
		t.Errorf("basic PodGroup: %+v", basic.Spec.SchedulingPolicy)
	}
	if Ours(builders.GangPodGroup("team-a", "train", 3)) {
		t.Error("a PodGroup without the label is not Lockstep's Kueue group")
	}
}

func TestOrderedReady(t *testing.T) {
	for policy, want := range map[appsv1.PodManagementPolicyType]bool{"": true, appsv1.OrderedReadyPodManagement: true, appsv1.ParallelPodManagement: false} {
		sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{PodManagementPolicy: policy}}
		if got := OrderedReady(sts); got != want {
			t.Errorf("policy %q: OrderedReady %v, want %v", policy, got, want)
		}
	}
}

// A Kueue pod group is classified and read by the framework like a job:
// a gang of its total count, or not one when its metadata cannot be read,
// saying why.
func TestGroupClassifiedLikeAJob(t *testing.T) {
	for name, tc := range map[string]struct {
		newest    *corev1.Pod
		class     jobintegration.Class
		groups    []jobintegration.Group
		condition string
	}{
		"a gang of its total count": {newest: member("a", "train", "3", 1).Obj(), class: jobintegration.ClassGang,
			groups: []jobintegration.Group{{Name: "train", Template: "member", MinCount: 3, Size: 3, Roles: []string{"member"}}}},
		"unreadable metadata": {newest: member("a", "train", "zero", 1).Obj(), class: jobintegration.ClassNotQualified, condition: "not a positive integer"},
		"not Lockstep's":      {newest: builders.MakePod().Label(GroupNameLabel, "train").Annotation(TotalCountAnnotation, "3").Obj(), class: jobintegration.ClassNotLockstep},
	} {
		t.Run(name, func(t *testing.T) {
			c := jobintegration.Set{}.Classify(&Group{name: "train", newest: tc.newest})
			if c.Class != tc.class {
				t.Fatalf("class %v, want %v", c.Class, tc.class)
			}
			if d := cmp.Diff(tc.groups, c.Groups); d != "" {
				t.Errorf("groups (-want,+got):\n%s", d)
			}
			if tc.condition != "" && (c.Why == nil || !strings.Contains(c.Why.Condition, tc.condition)) {
				t.Errorf("why %+v, want it to say %q", c.Why, tc.condition)
			}
		})
	}
}
