package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func TestAdmissionRejectsWithActionableMessages(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	pcName := "team-" + ns
	if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pcName}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pcName, metav1.DeleteOptions{})
	})
	small, err := h.Client.BatchV1().Jobs(ns).Create(ctx, builders.IndexedJob(ns, "small", 2, builders.MakePod().Obj()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A suspended gang Job: its gang is "held" (created now or soon).
	held := gpuJob(ns, "held", 2)
	held.Spec.Suspend = ptr.To(true)
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	withPG := func(mut func(*lockv1.PodGroup)) func() error {
		return func() error {
			pg := builders.GangPodGroup(ns, "pg", 2)
			mut(pg)
			return createPodGroup(ctx, h, pg)
		}
	}
	withJob := func(mut func(*batchv1.Job)) func() error {
		return func() error {
			j := gpuJob(ns, "j", 4)
			mut(j)
			_, err := h.Client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
			return err
		}
	}
	tests := map[string]struct {
		create  func() error
		wantErr []string
	}{
		"PodGroup: priorityClassName does not exist": {
			create:  withPG(func(pg *lockv1.PodGroup) { pg.Spec.PriorityClassName = "no-such-class" }),
			wantErr: []string{"spec.priorityClassName", "no-such-class", "PriorityClass does not exist"},
		},
		"PodGroup: priority does not match its class": {
			create: withPG(func(pg *lockv1.PodGroup) {
				pg.Spec.PriorityClassName = pcName
				pg.Spec.Priority = ptr.To[int32](1000000)
			}),
			wantErr: []string{"spec.priority", "does not match PriorityClass " + pcName + " (1000)", "set it to 1000"},
		},
		"PodGroup: priority without a class": {
			create:  withPG(func(pg *lockv1.PodGroup) { pg.Spec.Priority = ptr.To[int32](1000000) }),
			wantErr: []string{"spec.priority", "set priorityClassName instead"},
		},
		"PodGroup: minCount larger than the owning Job can run": {
			create: withPG(func(pg *lockv1.PodGroup) {
				pg.Spec.SchedulingPolicy.Gang.MinCount = 4
				pg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: small.Name, UID: small.UID}}
			}),
			wantErr: []string{"spec.schedulingPolicy.gang.minCount", "larger than Job small can ever run (2 pods at once)", "at most 2"},
		},
		"PodGroup: a name longer than a label value": {
			create:  func() error { return createPodGroup(ctx, h, builders.GangPodGroup(ns, strings.Repeat("g", 64), 2)) },
			wantErr: []string{"metadata.name", "value of its pods' label scheduling.lockstep.dev/pod-group", "must be no more than 63", "choose a name of at most 63 characters"},
		},
		"PodGroup: a topology key that is no label key": {
			create: withPG(func(pg *lockv1.PodGroup) {
				pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}, {Key: "rack name"}}}
			}),
			wantErr: []string{"spec.schedulingConstraints.topology[1].key", "not a valid label key", "use the key of a label your nodes carry"},
		},
		"PodGroup: a hand-written minCount of 1e9": {
			create:  withPG(func(pg *lockv1.PodGroup) { pg.Spec.SchedulingPolicy.Gang.MinCount = 1_000_000_000 }),
			wantErr: []string{"spec.schedulingPolicy.gang.minCount", "more than 100000, the most pods one workload can run at once", "set minCount to the number of pods that must run together"},
		},
		"Job: a template naming another Job's gang": {
			create:  withJob(func(j *batchv1.Job) { j.Spec.Template.Labels = map[string]string{lockv1.PodGroupLabel: "held"} }),
			wantErr: []string{"spec.template.metadata.labels[scheduling.lockstep.dev/pod-group]", "the gang of Job held", "remove the label to let Lockstep make the Job's own gang"},
		},
		"Job: a template for another scheduler naming another Job's gang": {
			create: func() error {
				j := builders.IndexedJob(ns, "k", 2, builders.MakePod().Member("held").Obj())
				_, err := h.Client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
				return err
			},
			wantErr: []string{"spec.template.metadata.labels[scheduling.lockstep.dev/pod-group]", "the gang of Job held"},
		},
		"Job: min-count annotation above parallelism": {
			create:  withJob(func(j *batchv1.Job) { j.Annotations = map[string]string{"scheduling.lockstep.dev/min-count": "9"} }),
			wantErr: []string{"scheduling.lockstep.dev/min-count", "larger than the job can ever run (4 pods at once)", "at most 4"},
		},
		"Job: unknown disruption mode": {
			create: withJob(func(j *batchv1.Job) {
				j.Annotations = map[string]string{"scheduling.lockstep.dev/disruption-mode": "sometimes"}
			}),
			wantErr: []string{"scheduling.lockstep.dev/disruption-mode", `use "all" (default) or "single"`},
		},
		"Job: priority class does not exist": {
			create:  withJob(func(j *batchv1.Job) { j.Spec.Template.Spec.PriorityClassName = "no-such-class" }),
			wantErr: []string{"spec.template.spec.priorityClassName", "no-such-class", "PriorityClass does not exist"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.create()
			if err == nil {
				t.Fatal("accepted; want a rejection")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("rejection %q does not contain %q", err.Error(), want)
				}
			}
		})
	}
	// The same PodGroup with a consistent priority is accepted, and so are
	// a 63-character name, valid topology keys and a large minCount within
	// the bound.
	if err := withPG(func(pg *lockv1.PodGroup) { pg.Spec.PriorityClassName = pcName; pg.Spec.Priority = ptr.To[int32](1000) })(); err != nil {
		t.Errorf("consistent priority rejected: %v", err)
	}
	valid := builders.GangPodGroup(ns, strings.Repeat("g", 63), 100_000)
	valid.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}, {Key: "example.com/rack"}}}
	if err := createPodGroup(ctx, h, valid); err != nil {
		t.Errorf("a valid PodGroup rejected: %v", err)
	}
}

// TestJobNamingAGroupNobodyHasIsWarned: a Job whose template names a
// PodGroup that does not exist is admitted with a warning saying its pods
// wait for it; when a gang Job of that name is created later, its
// admission warns that the first Job's pods will never join its gang.
func TestJobNamingAGroupNobodyHasIsWarned(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	w := &harness.Warnings{}
	cfg := rest.CopyConfig(h.Config)
	cfg.WarningHandler = w
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	early := builders.IndexedJob(ns, "early", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Member("late").Obj())
	early.Spec.Suspend = ptr.To(true)
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, early, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "names PodGroup late, which does not exist: the Job's pods wait, unscheduled, until it is created"; !strings.Contains(w.All(), want) {
		t.Errorf("warnings %q: want one containing %q", w.All(), want)
	}
	w.Reset()
	late := builders.IndexedJob(ns, "late", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	late.Spec.Suspend = ptr.To(true)
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "Job early's spec.template.metadata.labels[scheduling.lockstep.dev/pod-group] names PodGroup late, which will be this Job's gang"; !strings.Contains(w.All(), want) {
		t.Errorf("warnings %q: want one containing %q", w.All(), want)
	}
	// A gang Job nobody names is created without a word about groups.
	w.Reset()
	alone := builders.IndexedJob(ns, "alone", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	alone.Spec.Suspend = ptr.To(true)
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, alone, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := w.All(); strings.Contains(got, "PodGroup") {
		t.Errorf("a Job nobody names: want no warning about groups, got %q", got)
	}
}

func TestAdmissionWarningsAndDefaults(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	w := &harness.Warnings{}
	cfg := rest.CopyConfig(h.Config)
	cfg.WarningHandler = w
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A class no driver publishes, and a template naming a class that does not exist.
	fpga := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "fpga-" + ns}, Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "fpga.example.com"`}}}}}
	if _, err := h.Client.ResourceV1().DeviceClasses().Create(ctx, fpga, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.ResourceV1().DeviceClasses().Delete(context.Background(), fpga.Name, metav1.DeleteOptions{})
	})
	for name, class := range map[string]string{"fpga": fpga.Name, "typo": "gpu.exmaple.com"} {
		if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, name, class, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := builders.MakePod().Namespace(ns).Name("p").Label(lockv1.PodGroupLabel, "not-yet").ClaimTemplate("a", "fpga").ClaimTemplate("b", "typo").Obj()
	created, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := w.All()
	for _, want := range []string{
		"PodGroup " + ns + "/not-yet does not exist yet",
		`DeviceClass "gpu.exmaple.com" does not exist`,
		`no ResourceSlice in the cluster has a device of DeviceClass "` + fpga.Name + `"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q: want one containing %q", got, want)
		}
	}
	if created.Spec.SchedulerName != lockv1.SchedulerName {
		t.Errorf("a pod with the membership label must default to schedulerName lockstep, got %q", created.Spec.SchedulerName)
	}
	// Claims reserved for a whole PodGroup are refused with the reason,
	// never accepted and ignored.
	pg := builders.GangPodGroup(ns, "with-claim", 2)
	pg.Spec.ResourceClaims = []lockv1.PodGroupResourceClaim{{Name: "shared", ResourceClaimTemplateName: ptr.To("typo")}}
	err = h.CreatePodGroupErr(ctx, pg)
	for _, want := range []string{"spec.resourceClaims", "not supported by Lockstep", "ResourceClaimTemplate"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PodGroup with spec.resourceClaims: want a refusal containing %q, got %v", want, err)
		}
	}
	// A pod that does not target Lockstep is not touched and not warned about.
	w.Reset()
	plain, err := client.CoreV1().Pods(ns).Create(ctx, builders.MakePod().Namespace(ns).Name("plain").ClaimTemplate("b", "typo").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Spec.SchedulerName != corev1.DefaultSchedulerName || w.All() != "" {
		t.Errorf("unrelated pod: want default-scheduler and no warnings, got %q and %q", plain.Spec.SchedulerName, w.All())
	}
}

func createPodGroup(ctx context.Context, h *harness.Harness, pg *lockv1.PodGroup) error {
	return h.CreatePodGroupErr(ctx, pg)
}
