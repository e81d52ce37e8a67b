package workload

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// Annotations a workload sets on its objects.
const (
	// ArrivalAnnotation is when an object is created, as a Go duration
	// after the simulation starts (default 0).
	ArrivalAnnotation = "sim.lockstep.dev/arrival"
	// RuntimeAnnotation is how long a job runs once all the pods it needs
	// run together (a job of independent pods: how long each pod runs),
	// as a Go duration. On the object, or on its pod template.
	RuntimeAnnotation = "sim.lockstep.dev/runtime"
	// CheckpointIntervalAnnotation on a job: how often it saves its work
	// (a Go duration). A job that saves also saves on a preemption notice
	// (scheduling.lockstep.dev/preemption-notice), in
	// CheckpointDurationAnnotation (default 1m), and then acknowledges.
	CheckpointIntervalAnnotation = "sim.lockstep.dev/checkpoint-interval"
	// CheckpointDurationAnnotation on a job: how long one save takes.
	CheckpointDurationAnnotation = "sim.lockstep.dev/checkpoint-duration"
)

// APIVersion is the group/version of the simulator's own kinds (Failure,
// Mix).
const APIVersion = "sim.lockstep.dev/v1alpha1"

// Workload is what a simulation runs: the jobs, the objects they need,
// and the failures, read and checked by Load.
type Workload struct {
	PriorityClasses map[string]*schedulingv1.PriorityClass
	// DeviceClasses are added to the cluster's.
	DeviceClasses []*resourcev1.DeviceClass
	// ClaimTemplates by namespace/name.
	ClaimTemplates map[types.NamespacedName]*resourcev1.ResourceClaimTemplate
	// Claims are ResourceClaims created at the start (claims that pods
	// share by name).
	Claims []*resourcev1.ResourceClaim
	// Jobs in arrival order (ties in the order they were read).
	Jobs     []*Job
	Failures []Failure
	// Notes say how a Live workload was read where a simulation would
	// refuse it.
	Notes []string
}

// PodIntervalAnnotation spaces the creation of a job's pods (a Go
// duration): its controller creates one pod, then the next this much
// later, … (0, the default: all at once on arrival). Jobs whose pods are
// created interleaved are how seed 004's deadlock happens.
const PodIntervalAnnotation = "sim.lockstep.dev/pod-interval"

// Kinds of Job.
const (
	KindJob      = "Job"
	KindJobSet   = "JobSet"
	KindPodGroup = "PodGroup"
	// KindCompositePodGroup is a scheduling tree written by hand (a Live
	// workload's): its CompositePodGroups, PodGroups and pods.
	KindCompositePodGroup = "CompositePodGroup"
	KindPod               = "Pod"
)

// Job is one thing a user submits and waits for: a batch/v1 Job, a
// JobSet, a PodGroup with its pods, or a bare pod. Its pods are made as
// its controller makes them; how they are grouped depends on the
// scheduler the simulation models (Model).
type Job struct {
	Kind, Namespace, Name string
	UID                   types.UID
	Arrival, Runtime      time.Duration
	// CheckpointInterval is how often a gang job saves its work
	// (CheckpointIntervalAnnotation; 0: never): preempted or failed, it
	// loses only what it did since, and resumes from there.
	CheckpointInterval time.Duration
	// CheckpointDuration is how long it takes to save on a preemption
	// notice (CheckpointDurationAnnotation), after which it acknowledges.
	CheckpointDuration time.Duration
	// PodInterval spaces the creation of its pods (PodIntervalAnnotation).
	PodInterval time.Duration
	// Priority and PreemptionPolicy are its pods' (from their
	// PriorityClass, as the API server's Priority admission sets them).
	Priority int32
	// Pods are the pods the job runs at once, as its controller first
	// creates them (Template of each; claims from templates not created
	// yet).
	Pods []*corev1.Pod
	// Need is how many pods must run together for the job to make
	// progress (its gang's minCount); 0 for a job of independent pods,
	// each of which does its work alone.
	Need int
	// Completions is, for a job of independent pods, how many pods must
	// succeed (at most len(Pods) run at once).
	Completions int
	// Gangs are the PodGroups Lockstep schedules the job as (its Job
	// integration's, or the user's); InTree those of the in-tree 1.37 API
	// (disruptionMode single by default). Both nil for a job that is not
	// a gang. Pods join them by lockv1.PodGroupLabel as the models set it
	// (Groups).
	Gangs, InTree []*lockv1.PodGroup
	// Tree is, for a job whose roles make a scheduling tree (a Ray
	// cluster, an elastic Kubeflow job, an MPIJob with a launcher), the
	// root CompositePodGroup Lockstep's integration hangs Gangs under;
	// nil otherwise. The in-tree model places the groups one by one.
	Tree *lockv1.CompositePodGroup
	// Composites are, for a tree written by hand, every CompositePodGroup
	// of it (Tree among them); nil otherwise (the tree is Tree alone).
	Composites []*lockv1.CompositePodGroup
	// GroupOf is the group each of Pods joins ("" none), by index.
	GroupOf []string
	// Template is the field path of what a job's pods are made from, for
	// errors ("spec.template"); podSpec, when set, the path of each pod's
	// spec by pod name (a job of roles).
	Template string
	podSpec  map[string]*field.Path
}

// Ref is how messages name the job: "Job ml/train-a".
func (j *Job) Ref() string { return j.Kind + " " + j.Namespace + "/" + j.Name }

// Gang reports whether the job's pods must run together.
func (j *Job) Gang() bool { return j.Need > 0 }

// Failure is a node, or one device of a node, failing at a time (and
// coming back after RepairAfter, if set).
type Failure struct {
	Name string
	At   time.Duration
	Node string
	// Driver and Device name one device of the node; empty for the whole
	// node.
	Driver, Device string
	// RepairAfter is how long the failure lasts; 0 for ever.
	RepairAfter time.Duration
}

// Ref is how messages name the failure.
func (f Failure) Ref() string { return "Failure " + f.Name }
