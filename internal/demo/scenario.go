package demo

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
)

// mode is one column of the comparison.
type mode struct {
	name string
	// ramp: in the deadlock scenario the jobs' ranks arrive interleaved,
	// one rank of each job at a time (the arrival pattern behind seed 004's
	// 3 + 3; without it the pod-by-pod result depends on timing). The gang
	// columns do not ramp: a Job is a gang of its parallelism from the
	// start, and gang admission does not depend on arrival order.
	ramp       bool
	profile    devcluster.Profile
	schedulers []devcluster.Scheduler
	// gang: how the jobs ask for all-or-nothing placement.
	gang gangStyle
}

type gangStyle int

const (
	podByPod    gangStyle = iota // plain Jobs, kube-scheduler
	inTreeGang                   // Job spec.scheduling gang.minCount (needs the upstream gates)
	lockstepJob                  // plain Job with schedulerName lockstep (the Job integration makes the gang)
)

var modes = []mode{
	{name: "kube-scheduler 1.37, pod by pod", ramp: true, profile: devcluster.ProfileEKS, schedulers: []devcluster.Scheduler{devcluster.SchedulerKube}, gang: podByPod},
	{name: "kube-scheduler 1.37, in-tree gang", profile: devcluster.ProfileUpstream, schedulers: []devcluster.Scheduler{devcluster.SchedulerKube}, gang: inTreeGang},
	{name: "Lockstep (eks profile, no gates)", profile: devcluster.ProfileEKS, schedulers: []devcluster.Scheduler{devcluster.SchedulerLockstep}, gang: lockstepJob},
}

const ranks = 4

// accelerator is how a rank gets its accelerator.
type accelerator int

const (
	draGPU   accelerator = iota // a ResourceClaimTemplate for one gpu.example.com device
	extended                    // example.com/accel: 1
)

func (a accelerator) unit() string {
	if a == draGPU {
		return "GPUs"
	}
	return "accels"
}

// Priority classes of the preemption scenarios.
const (
	classResearch   = "research"   // 100
	classProduction = "production" // 10000
)

// scenario is one table of the demo.
type scenario struct {
	name, title, moral string
	namespace          string
	acc                accelerator
	// jobs in the order they are shown; priorities by name.
	jobs       []string
	priorities map[string]int32
	run        func(ctx context.Context, e env, m mode, sc scenario, quiet time.Duration) ([]JobState, error)
}

// env is what a scenario talks to.
type env struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
}

var scenarios = []scenario{
	{
		name: "deadlock", namespace: "ml-team", acc: draGPU, jobs: []string{"train-a", "train-b"},
		title: "Seed 004 — two 4-rank jobs, 1 GPU per rank, on 3 nodes × 2 GPUs",
		moral: `Read it: pod by pod, ranks of both jobs hold GPUs and no job can start (the deadlock).
A gang scheduler admits one job whole and leaves the other waiting with nothing held.`,
		run: runDeadlock,
	},
	{
		name: "preempt-dra", namespace: "prod-dra", acc: draGPU, jobs: []string{"research", "production"},
		priorities: map[string]int32{"research": 100, "production": 10000},
		title:      "Seed 004 preemption, DRA — research (priority 100) holds 4 of 6 GPUs, production (priority 10000) needs 4",
		moral: `Read it: kube-scheduler 1.37 reclaims no DRA device for production — pod by pod it is left 2/4
holding 2 GPUs, the in-tree gang finds no victims. Lockstep evicts research whole; research waits
whole, holding nothing, and runs again when production ends.`,
		run: runPreemption,
	},
	{
		name: "preempt-accel", namespace: "prod-accel", acc: extended, jobs: []string{"research", "production"},
		priorities: map[string]int32{"research": 100, "production": 10000},
		title:      "Seed 004 preemption, extended resource — the same with example.com/accel: 1 per rank",
		moral: `Read it: upstream does preempt node-local extended resources, but pod by pod and with the in-tree
gang's default disruptionMode single it evicts only the 2 pods it needs: research is left partially
alive, holding 2 accelerators. Lockstep's default (disruptionMode all) takes it whole.`,
		run: runPreemption,
	},
	{
		name: "jobset", namespace: "ml-jobset", acc: draGPU, jobs: []string{"train-a", "train-b"},
		title: "JobSets — two JobSets of a driver and 3 workers, 1 GPU per pod, the second submitted while the first runs (2 GPUs free)",
		moral: `Read it: pod by pod the second JobSet takes the 2 free GPUs and sits holding them, 2 of 4 running.
kube-scheduler's in-tree gang cannot see a JobSet (JobSet v0.12.0 creates no Workload), so it does
the same. Lockstep makes each JobSet one gang from schedulerName alone: the second waits whole,
holding nothing, until 4 GPUs are free.`,
		run: runJobSets,
	},
}

func createPriorityClasses(ctx context.Context, client kubernetes.Interface) error {
	for name, v := range map[string]int32{classResearch: 100, classProduction: 10000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// setUp creates the scenario's namespace and, for GPUs, the claim template.
func setUp(ctx context.Context, client kubernetes.Interface, sc scenario) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sc.namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if sc.acc != draGPU {
		return nil
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.namespace, Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}},
		}}},
	}
	_, err := client.ResourceV1().ResourceClaimTemplates(sc.namespace).Create(ctx, tmpl, metav1.CreateOptions{})
	return err
}

// job is a 4-rank Indexed Job as the mode expresses gangs. Its
// podFailurePolicy ignores disruptions, so preempted ranks are recreated
// without consuming backoffLimit, in every column alike.
func job(name string, m mode, sc scenario, parallelism int32) *batchv1.Job {
	ctr := corev1.Container{
		Name: "trainer", Image: "registry.example/trainer:v1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}
	spec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0)}
	switch sc.acc {
	case draGPU:
		spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		ctr.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	case extended:
		ctr.Resources.Requests["example.com/accel"] = resource.MustParse("1")
		ctr.Resources.Limits = corev1.ResourceList{"example.com/accel": resource.MustParse("1")}
	}
	spec.Containers = []corev1.Container{ctr}
	if p, ok := sc.priorities[name]; ok {
		spec.PriorityClassName = classResearch
		if p > 100 {
			spec.PriorityClassName = classProduction
		}
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.namespace, Name: name},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(parallelism), Completions: ptr.To[int32](ranks),
			CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To[int32](4),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobLabel: name}}, Spec: spec},
		},
	}
	switch m.gang {
	case inTreeGang:
		j.Spec.Scheduling = &batchv1.JobSchedulingConfiguration{SchedulingPolicy: &schedulingv1alpha3.WorkloadPodGroupSchedulingPolicy{
			Gang: &schedulingv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: ptr.To[int32](ranks)},
		}}
	case lockstepJob:
		j.Spec.Template.Spec.SchedulerName = lockv1.SchedulerName
	}
	return j
}

const jobLabel = "demo.lockstep.dev/job"

func createJob(ctx context.Context, client kubernetes.Interface, j *batchv1.Job) error {
	if _, err := client.BatchV1().Jobs(j.Namespace).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("job %s: %w", j.Name, err)
	}
	return nil
}
