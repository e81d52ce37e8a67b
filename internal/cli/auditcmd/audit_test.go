package auditcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/audit"
	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/cli/clitest"
	"github.com/lockstep-dev/lockstep/test/builders"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files")

// parsed is what Complete and Validate make of a command line.
type parsed struct {
	Namespace     string
	AllNamespaces bool
	Output        string
	Grace         time.Duration
}

func TestCompleteValidate(t *testing.T) {
	kubeconfig := clitest.Kubeconfig(t, "config", "dev", clitest.Context{Name: "dev", Server: "https://dev.example:6443", Namespace: "ml-team"})
	for _, tc := range []struct {
		name    string
		argv    []string
		want    parsed
		wantErr []string
	}{
		{name: "the context's namespace, a table", want: parsed{Namespace: "ml-team", Grace: 30 * time.Second}},
		{name: "-A -o json", argv: []string{"-A", "-o", "json"}, want: parsed{AllNamespaces: true, Output: "json", Grace: 30 * time.Second}},
		{name: "-n -o yaml --grace", argv: []string{"-n", "research", "-o", "yaml", "--grace", "2m"}, want: parsed{Namespace: "research", Output: "yaml", Grace: 2 * time.Minute}},
		{name: "-o wide", argv: []string{"-o", "wide"}, want: parsed{Namespace: "ml-team", Output: "wide", Grace: 30 * time.Second}},
		{name: "an argument", argv: []string{"jobs"}, wantErr: []string{`unknown command "jobs"`}},
		{name: "-A with -n", argv: []string{"-A", "-n", "ml"}, wantErr: []string{"-A (all namespaces) and -n ml both given"}},
		{name: "an output format audit does not print", argv: []string{"-o", "name"},
			wantErr: []string{`-o "name": not an output format of this command: use one of json, yaml, wide`}},
		{name: "--grace 0", argv: []string{"--grace", "0s"}, wantErr: []string{"--grace 0s: must be a positive duration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clitest.Env(t, kubeconfig)
			o := NewOptions()
			err := clitest.CompleteValidate(newCommand(o), tc.argv, func([]string) error { return o.Complete() }, o.Validate)
			if clitest.WantErr(t, err, tc.wantErr) {
				return
			}
			got := parsed{Namespace: o.Client.Namespace, AllNamespaces: o.Client.AllNamespaces, Output: o.Output.Format, Grace: o.Grace}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

var t0 = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

// seed004 is two 4-rank Jobs of kube-scheduler, 3 ranks of each bound
// holding a GPU and the 4th unschedulable, and a healthy Job running
// whole: the objects as the API server lists them.
func seed004() (pods []runtime.Object, jobs []runtime.Object) {
	for _, name := range []string{"train-a", "train-b", "healthy"} {
		job := builders.IndexedJob("ml", name, 4, builders.MakePod().Obj())
		job.UID = k8stypes.UID("uid-" + name)
		job.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
		jobs = append(jobs, job)
		for i := 0; i < 4; i++ {
			p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("%s-%d", name, i)).Req("nvidia.com/gpu", "1").Obj()
			p.CreationTimestamp = metav1.NewTime(t0)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: job.UID, Controller: ptr.To(true)}}
			cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(2 * time.Second))}
			if i == 3 && name != "healthy" {
				cond = corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(t0.Add(3 * time.Second))}
			} else {
				p.Spec.NodeName, p.Status.Phase = "node-0", corev1.PodRunning
			}
			p.Status.Conditions = []corev1.PodCondition{cond}
			pods = append(pods, p)
		}
	}
	return pods, jobs
}

// fakes are clients of a cluster that serves batch/v1 Jobs and
// resource.k8s.io/v1, holding seed004's objects.
func fakes(t *testing.T) (*clientopts.Clients, *kubefake.Clientset, *dynamicfake.FakeDynamicClient) {
	pods, jobs := seed004()
	kube := kubefake.NewClientset(pods...)
	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "batch/v1", APIResources: []metav1.APIResource{{Name: "jobs", Namespaced: true, Kind: "Job"}}},
		{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceclaims", Namespaced: true}, {Name: "resourceclaimtemplates", Namespaced: true}}},
	}
	scheme := runtime.NewScheme()
	if err := batchv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		batchv1.SchemeGroupVersion.WithResource("jobs"): "JobList"}, jobs...)
	return &clientopts.Clients{Kube: kube, Dynamic: dyn}, kube, dyn
}

// Run reads the cluster with list calls only — nothing is created,
// updated, patched or deleted — and prints the audit: the two partial
// Jobs, deadlocked, and not the healthy one.
func TestRun(t *testing.T) {
	c, kube, dyn := fakes(t)
	o := NewOptions()
	o.Clients, o.Client.Namespace, o.Output.Format = c, "ml", "json"
	o.Now = func() time.Time { return t0.Add(1802 * time.Second) }
	var out bytes.Buffer
	if err := o.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	var r audit.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range r.Workloads {
		got = append(got, fmt.Sprintf("%s/%s partialNow=%v deadlocked=%v hours=%v", w.Kind, w.Name, w.PartialNow, w.Deadlocked, w.DeviceHoursHeld))
	}
	want := []string{"Job/train-a partialNow=true deadlocked=true hours=1.5", "Job/train-b partialNow=true deadlocked=true hours=1.5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workloads (-want,+got):\n%s", diff)
	}
	var verbs []string
	for _, a := range append(kube.Actions(), dyn.Actions()...) {
		if a.GetVerb() == "get" && a.GetResource().Resource == "resource" {
			continue // discovery
		}
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	wantVerbs := []string{"list pods", "list resourceclaims", "list resourceclaimtemplates", "list events", "list jobs"}
	if diff := cmp.Diff(wantVerbs, verbs); diff != "" {
		t.Errorf("calls to the API server (-want,+got):\n%s", diff)
	}
}

// The table of seed 004, as docs/audit.md shows it.
func TestTable(t *testing.T) {
	c, _, _ := fakes(t)
	o := NewOptions()
	o.Clients, o.Client.Namespace = c, "ml"
	o.Now = func() time.Time { return t0.Add(1802 * time.Second) }
	var out bytes.Buffer
	if err := o.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "seed004.txt"), out.String())
}

// A user who may not list a kind gets the audit of the rest and a note
// saying what it misses and which role grants it.
func TestForbiddenKindIsNoted(t *testing.T) {
	c, kube, _ := fakes(t)
	kube.PrependReactor("list", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("wrapped: %w", newForbidden("events"))
	})
	o := NewOptions()
	o.Clients, o.Client.Namespace, o.Output.Format = c, "ml", "json"
	o.Now = func() time.Time { return t0.Add(1802 * time.Second) }
	var out bytes.Buffer
	if err := o.Run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	var r audit.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	want := []string{"could not list events (forbidden): preemptions of pods that are gone are not seen; the ClusterRole lockstep-audit (docs/audit-clusterrole.yaml) grants it"}
	if diff := cmp.Diff(want, r.Notes); diff != "" {
		t.Errorf("notes (-want,+got):\n%s", diff)
	}
	if len(r.Workloads) != 2 {
		t.Errorf("%d workloads reported, want the 2 partial Jobs", len(r.Workloads))
	}
}

// docs/audit-clusterrole.yaml is ClusterRole(): list on what the audit
// reads, nothing else.
func TestClusterRoleManifest(t *testing.T) {
	role := ClusterRole()
	for _, r := range role.Rules {
		if diff := cmp.Diff([]string{"list"}, r.Verbs); diff != "" {
			t.Errorf("rule %v: verbs (-want,+got):\n%s", r.Resources, diff)
		}
	}
	b, err := yaml.Marshal(role)
	if err != nil {
		t.Fatal(err)
	}
	doc := "# The read-only role of `lockstep audit`: list, on what it reads, nothing else.\n" +
		"# Generated from internal/cli/auditcmd.ClusterRole: `go test ./internal/cli/auditcmd -run TestClusterRoleManifest -rewrite`.\n" +
		strings.Replace(string(b), "  creationTimestamp: null\n", "", 1)
	golden(t, filepath.Join("..", "..", "..", "docs", "audit-clusterrole.yaml"), doc)
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *rewrite {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want,+got; -rewrite rewrites it):\n%s", path, diff)
	}
}

func newForbidden(resource string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", fmt.Errorf("user auditor may not list %s", resource))
}
