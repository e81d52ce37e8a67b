package getcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/explaincmd"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
	lockfake "github.com/lockstep-dev/lockstep/internal/client/clientset/versioned/fake"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

var created = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

// trainJob is the Job that controls PodGroup ml/train.
var trainJob = metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-train", Controller: ptr.To(true)}

// fixture is a gang whose pods include every case the scheduler's
// resolution tells apart, where counting pods that carry the label
// (bound = on a node and staying, member = that or pending) would differ:
// a finished rank, a gated member, a member by spec.schedulingGroup, a pod
// of another Job, a pod of another scheduler and a member of an ended
// incarnation. Beside it, a basic group with no pods.
func fixture() (groups []*lockv1.PodGroup, pods []*corev1.Pod) {
	train := builders.GangPodGroup("ml", "train", 3)
	train.CreationTimestamp = metav1.NewTime(created)
	train.OwnerReferences = []metav1.OwnerReference{trainJob}
	train.Status.Incarnation = &lockv1.PodGroupIncarnation{Number: 2,
		Members: []lockv1.PodGroupMember{{Name: "old-0", UID: "old-0"}},
		Ended:   &lockv1.PodGroupIncarnationEnd{Reason: "MemberLost", Time: metav1.NewTime(created.Add(time.Minute))}}
	train.Status.Conditions = []metav1.Condition{
		{Type: lockv1.PodGroupInitiallyScheduled, Status: metav1.ConditionTrue, Reason: lockv1.PodGroupReasonScheduled, LastTransitionTime: metav1.NewTime(created.Add(4 * time.Second))},
		{Type: lockv1.Running, Status: metav1.ConditionFalse, Reason: lockv1.RunningReasonRestarting, Message: "lost old-0"},
	}
	eval := &lockv1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "eval", CreationTimestamp: metav1.NewTime(created)}}
	eval.Spec.SchedulingPolicy.Basic = &lockv1.BasicSchedulingPolicy{}

	member := func(name string, owner metav1.OwnerReference) *builders.PodWrapper {
		w := builders.MakePod().Namespace("ml").Name(name).Member("train")
		w.UID = types.UID(name)
		w.OwnerReferences = []metav1.OwnerReference{owner}
		return w
	}
	running := func(w *builders.PodWrapper, node string, phase corev1.PodPhase) *corev1.Pod {
		w.Node(node)
		w.Status.Phase = phase
		return w.Obj()
	}
	gated := member("train-2", trainJob).Obj()
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	bySchedulingGroup := builders.MakePod().Namespace("ml").Name("train-4").Scheduler(lockv1.SchedulerName).Obj()
	bySchedulingGroup.OwnerReferences = []metav1.OwnerReference{trainJob}
	bySchedulingGroup.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
	otherJob := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "other", UID: "job-other", Controller: ptr.To(true)}
	otherScheduler := member("stray-0", trainJob).Scheduler("default-scheduler").Obj()
	pods = []*corev1.Pod{
		running(member("train-0", trainJob), "w0", corev1.PodRunning),   // bound
		running(member("train-1", trainJob), "w1", corev1.PodSucceeded), // finished: counts as bound
		gated,                                // gated
		member("train-3", trainJob).Obj(),    // pending
		bySchedulingGroup,                    // pending, a member without the label
		member("intruder-0", otherJob).Obj(), // another Job's: the group does not admit it
		otherScheduler,                       // not Lockstep's
		running(member("old-0", trainJob), "w2", corev1.PodRunning), // of the ended incarnation
	}
	return []*lockv1.PodGroup{train, eval}, pods
}

func clients(t *testing.T) *clientopts.Clients {
	groups, pods := fixture()
	var kubeObjs, lockObjs, dynObjs []runtime.Object
	for _, p := range pods {
		kubeObjs = append(kubeObjs, p)
	}
	for _, g := range groups {
		lockObjs = append(lockObjs, g)
		u, err := podgroup.ToUnstructured(g)
		if err != nil {
			t.Fatal(err)
		}
		dynObjs = append(dynObjs, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		podgroup.Resource: "PodGroupList", podgroup.UpstreamResource: "PodGroupList",
		podgroup.CompositeResource: "CompositePodGroupList", podgroup.UpstreamCompositeResource: "CompositePodGroupList",
	}, dynObjs...)
	return &clientopts.Clients{Kube: kubefake.NewClientset(kubeObjs...), Dynamic: dyn, Lockstep: lockfake.NewSimpleClientset(lockObjs...)}
}

func TestListRows(t *testing.T) {
	rows, err := listRows(context.Background(), clients(t), "ml", nil, created.Add(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Namespace: "ml", Name: "eval", Policy: "basic", MinCount: 1, Status: "Unknown", Reason: "-", State: "-", Age: "90s", TimeToScheduled: "-", Disruption: "all"},
		{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 3, Members: 5, Bound: 2, Pending: 2, Gated: 1,
			Status: "True", Reason: "Scheduled", State: "Restarting", StateMessage: "lost old-0", Incarnation: 2, Age: "90s", TimeToScheduled: "4s", Disruption: "all"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

// get's counts are explain's: both resolve the group with podgroup.Resolve.
func TestCountsAgreeWithExplain(t *testing.T) {
	c := clients(t)
	rows, err := listRows(context.Background(), c, "ml", []string{"train"}, created)
	if err != nil || len(rows) != 1 {
		t.Fatalf("get: %v, %d rows", err, len(rows))
	}
	o := explaincmd.NewOptions()
	o.Kind, o.Name, o.Client.Namespace, o.Clients, o.Output.Format = "podgroup", "train", "ml", c, "json"
	var out bytes.Buffer
	if err := o.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	var r explain.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	type counts struct{ MinCount, Members, Bound, Pending int }
	fromGet := counts{MinCount: int(rows[0].MinCount), Members: rows[0].Members, Bound: rows[0].Bound, Pending: rows[0].Pending}
	fromExplain := counts{MinCount: r.MinCount, Members: r.Members, Bound: r.Bound, Pending: r.Pending}
	if diff := cmp.Diff(fromExplain, fromGet); diff != "" {
		t.Errorf("get disagrees with explain (-explain,+get):\n%s", diff)
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name          string
		namespace     string
		all           bool
		names         []string
		format        string
		want, wantErr string
		wantErrOut    string
	}{
		{name: "a name that exists and one that does not: the row, and the error naming the fix",
			namespace: "ml", names: []string{"train", "nope"}, format: "name",
			want:    "podgroup.scheduling.lockstep.dev/train\n",
			wantErr: "PodGroup ml/nope not found: `lockstep get podgroups -n ml` lists those there are"},
		{name: "an empty namespace is said so, as kubectl does", namespace: "empty",
			wantErrOut: "No PodGroups found in namespace empty.\n"},
		{name: "-A -o name", all: true, format: "name",
			want: "podgroup.scheduling.lockstep.dev/eval\npodgroup.scheduling.lockstep.dev/train\n"},
		{name: "-o json of an empty namespace is an empty list", namespace: "empty", format: "json", want: "[]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.Clients, o.Client.Namespace, o.Client.AllNamespaces, o.Names, o.Output.Format = clients(t), tc.namespace, tc.all, tc.names, tc.format
			o.Now = func() time.Time { return created }
			var out, errOut bytes.Buffer
			err := o.Run(context.Background(), &out, &errOut)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrOut, errOut.String()); diff != "" {
				t.Errorf("stderr (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPrintRows(t *testing.T) {
	rows := []Row{{Namespace: "ml", Name: "train", Policy: "gang", MinCount: 3, Members: 5, Bound: 2, Pending: 2, Gated: 1, Status: "True", Reason: "Scheduled",
		State: "Restarting", StateMessage: "lost old-0", Incarnation: 2, Age: "90s", TimeToScheduled: "4s", Disruption: "all", Topology: "zone"}}
	for _, tc := range []struct {
		name   string
		format string
		all    bool
		want   []string
	}{
		{name: "table", want: []string{
			"NAME    POLICY   MINCOUNT   BOUND/MEMBERS   SCHEDULED   REASON      STATE        INCARNATION   AGE   TIME-TO-SCHEDULED",
			"train   gang     3          2/5             True        Scheduled   Restarting   2             90s   4s"}},
		{name: "-A adds the namespace", all: true, want: []string{
			"NAMESPACE   NAME    POLICY   MINCOUNT   BOUND/MEMBERS   SCHEDULED   REASON      STATE        INCARNATION   AGE   TIME-TO-SCHEDULED",
			"ml          train   gang     3          2/5             True        Scheduled   Restarting   2             90s   4s"}},
		{name: "wide adds pending, gated and the policy details", format: "wide", want: []string{
			"NAME    POLICY   MINCOUNT   BOUND/MEMBERS   SCHEDULED   REASON      STATE        INCARNATION   AGE   TIME-TO-SCHEDULED   PENDING   GATED   DISRUPTION   PRIORITY-CLASS   TOPOLOGY   MESSAGE",
			"train   gang     3          2/5             True        Scheduled   Restarting   2             90s   4s                  2         1       all          -                zone       lost old-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f := output.New("", "a table", "json", "yaml", "wide", "name")
			f.Format = tc.format
			if err := printRows(&out, f, tc.all, rows); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			for i := range got {
				got[i] = strings.TrimRight(got[i], " ")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
