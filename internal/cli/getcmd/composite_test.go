package getcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/output"
	lockfake "github.com/lockstep-dev/lockstep/internal/client/clientset/versioned/fake"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// treeClients hold a tree in ml — root job (gang of 2, in one zone,
// scheduled after 7s) over worker groups w0 and w1 (basic, single) — whose
// children are a CompositePodGroup and two PodGroups, and a
// CompositePodGroup of the same name in another namespace with one child
// there.
func treeClients() *clientopts.Clients {
	cpg := func(ns, name, parent string) *lockv1.CompositePodGroup {
		c := &lockv1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)}}
		c.Spec.SchedulingPolicy.Basic = &lockv1.CompositeBasicSchedulingPolicy{}
		if parent != "" {
			c.Spec.ParentCompositePodGroupName = ptr.To(parent)
		}
		return c
	}
	job := cpg("ml", "job", "")
	job.Spec.SchedulingPolicy = lockv1.CompositePodGroupSchedulingPolicy{Gang: &lockv1.CompositeGangSchedulingPolicy{MinGroupCount: 2}}
	job.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}}}
	job.Spec.PriorityClassName = "high"
	job.Status.Conditions = []metav1.Condition{{Type: lockv1.CompositePodGroupInitiallyScheduled, Status: metav1.ConditionTrue,
		Reason: "Scheduled", Message: "2 of 2 groups fit in zone-1", LastTransitionTime: metav1.NewTime(created.Add(7 * time.Second))}}
	w0 := cpg("ml", "w0", "job")
	w0.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	under := func(pg *lockv1.PodGroup, parent string) *lockv1.PodGroup {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
		return pg
	}
	objs := []runtime.Object{job, w0, under(builders.GangPodGroup("ml", "w1", 2), "job"), under(builders.GangPodGroup("ml", "head", 1), "job"),
		under(builders.GangPodGroup("ml", "w0-a", 2), "w0"), builders.GangPodGroup("ml", "flat", 2),
		cpg("other", "job", ""), under(builders.GangPodGroup("other", "g", 1), "job")}
	return &clientopts.Clients{Lockstep: lockfake.NewSimpleClientset(objs...)}
}

// TestListCompositeRows: each node's parent, policy and children (the
// PodGroups and CompositePodGroups naming it, in its namespace only), its
// condition and time to scheduled; a name that does not exist is an error
// naming the fix, beside the rows found.
func TestListCompositeRows(t *testing.T) {
	job := CompositeRow{Namespace: "ml", Name: "job", Policy: "gang", MinGroupCount: 2, Children: 3, Status: "True", Reason: "Scheduled",
		Message: "2 of 2 groups fit in zone-1", Age: "90s", TimeToScheduled: "7s", Disruption: "all", PriorityClass: "high", Topology: "topology.kubernetes.io/zone"}
	w0 := CompositeRow{Namespace: "ml", Name: "w0", Parent: "job", Policy: "basic", Children: 1, Status: "Unknown", Reason: "-", Age: "90s", TimeToScheduled: "-", Disruption: "single"}
	other := CompositeRow{Namespace: "other", Name: "job", Policy: "basic", Children: 1, Status: "Unknown", Reason: "-", Age: "90s", TimeToScheduled: "-", Disruption: "all"}
	for name, tc := range map[string]struct {
		ns      string
		names   []string
		want    []CompositeRow
		wantErr string
	}{
		"a namespace":     {ns: "ml", want: []CompositeRow{job, w0}},
		"every namespace": {want: []CompositeRow{job, w0, other}},
		"a name and one that does not exist": {ns: "ml", names: []string{"w0", "nope"}, want: []CompositeRow{w0},
			wantErr: "CompositePodGroup ml/nope not found: `lockstep get compositepodgroups -n ml` lists those there are"},
	} {
		t.Run(name, func(t *testing.T) {
			rows, err := listCompositeRows(context.Background(), treeClients(), tc.ns, tc.names, created.Add(90*time.Second))
			if diff := cmp.Diff(tc.want, rows); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error: want %q, got %q", tc.wantErr, got)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestPrintCompositeRows(t *testing.T) {
	rows, err := listCompositeRows(context.Background(), treeClients(), "ml", nil, created.Add(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		format string
		want   []string
	}{
		{name: "table", want: []string{
			"NAME   PARENT   POLICY   MINGROUPCOUNT   CHILDREN   SCHEDULED   REASON      AGE   TIME-TO-SCHEDULED",
			"job    -        gang     2               3          True        Scheduled   90s   7s",
			"w0     job      basic    -               1          Unknown     -           90s   -"}},
		{name: "wide", format: "wide", want: []string{
			"NAME   PARENT   POLICY   MINGROUPCOUNT   CHILDREN   SCHEDULED   REASON      AGE   TIME-TO-SCHEDULED   DISRUPTION   PRIORITY-CLASS   TOPOLOGY                      MESSAGE",
			"job    -        gang     2               3          True        Scheduled   90s   7s                  all          high             topology.kubernetes.io/zone   2 of 2 groups fit in zone-1",
			"w0     job      basic    -               1          Unknown     -           90s   -                   single       -                -"}},
		{name: "name", format: "name", want: []string{"compositepodgroup.scheduling.lockstep.dev/job", "compositepodgroup.scheduling.lockstep.dev/w0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f := output.New("", "a table", "json", "yaml", "wide", "name")
			f.Format = tc.format
			if err := printCompositeRows(&out, f, false, rows); err != nil {
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

// TestRunComposites: an empty namespace is said so, as kubectl does, and
// -o json of it is an empty list.
func TestRunComposites(t *testing.T) {
	for _, tc := range []struct {
		format, want, wantErrOut string
	}{
		{wantErrOut: "No CompositePodGroups found in namespace empty.\n"},
		{format: "json", want: "[]\n"},
	} {
		o := NewOptions()
		o.Clients, o.Client.Namespace, o.Composites, o.Output.Format = treeClients(), "empty", true, tc.format
		o.Now = func() time.Time { return created }
		var out, errOut bytes.Buffer
		if err := o.Run(context.Background(), &out, &errOut); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, out.String()); diff != "" {
			t.Errorf("-o %q output (-want,+got):\n%s", tc.format, diff)
		}
		if diff := cmp.Diff(tc.wantErrOut, errOut.String()); diff != "" {
			t.Errorf("-o %q stderr (-want,+got):\n%s", tc.format, diff)
		}
	}
}
