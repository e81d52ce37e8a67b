package report

import (
	"time"
)

// Report is what a simulation found, per scheduler. Its JSON field names
// are stable: scripts rely on them (docs/simulate.md).
type Report struct {
	Cluster  ClusterSummary  `json:"cluster"`
	Workload WorkloadSummary `json:"workload"`
	// HorizonSeconds is the window every scheduler is measured over: from
	// 0 to the last event of the longest run (or the --horizon).
	HorizonSeconds float64           `json:"horizonSeconds"`
	Schedulers     []SchedulerReport `json:"schedulers"`
}

// ClusterSummary describes the cluster.
type ClusterSummary struct {
	Name    string `json:"name,omitempty"`
	Nodes   int    `json:"nodes"`
	Devices int    `json:"devices"`
	// DomainLabel is the node label the fragmentation domains are the
	// values of.
	DomainLabel string   `json:"domainLabel"`
	Domains     []string `json:"domains"`
}

// WorkloadSummary describes the workload.
type WorkloadSummary struct {
	Jobs     int `json:"jobs"`
	GangJobs int `json:"gangJobs"`
	// TreeJobs are the gang jobs whose roles make a scheduling tree.
	TreeJobs           int     `json:"treeJobs,omitempty"`
	Pods               int     `json:"pods"`
	Failures           int     `json:"failures"`
	Priorities         []int32 `json:"priorities"`
	LastArrivalSeconds float64 `json:"lastArrivalSeconds"`
}

// SchedulerReport is one scheduler's run.
type SchedulerReport struct {
	Name         string `json:"name"`
	Approximates string `json:"approximates"`
	Jobs         int    `json:"jobs"`
	// JobsCompleted ran to the end; JobsNeverStarted never ran (all the
	// pods a gang needs never ran together), of which JobsDeadlocked
	// still held devices at the end and JobsNeverFit no longer fit the
	// cluster as failures left it.
	JobsCompleted    int `json:"jobsCompleted"`
	JobsNeverStarted int `json:"jobsNeverStarted"`
	JobsDeadlocked   int `json:"jobsDeadlocked"`
	JobsNeverFit     int `json:"jobsNeverFit"`
	// MakespanSeconds is from the first arrival to the last completion;
	// null when a job never completed.
	MakespanSeconds *float64 `json:"makespanSeconds"`
	// WaitSeconds: arrival to first run; CompletionSeconds: arrival to
	// completion (of the jobs that got there).
	WaitSeconds       Percentiles `json:"waitSeconds"`
	CompletionSeconds Percentiles `json:"completionSeconds"`
	// DeviceUtilization is the share of device-time used by running
	// jobs, DeviceHeldIdleFraction the share held by pods of jobs that
	// were not running whole.
	DeviceUtilization      float64 `json:"deviceUtilization"`
	DeviceHeldIdleFraction float64 `json:"deviceHeldIdleFraction"`
	DeviceHoursRunning     float64 `json:"deviceHoursRunning"`
	DeviceHoursHeldIdle    float64 `json:"deviceHoursHeldIdle"`
	// Preemptions are preemptions carried out; PreemptedPods their
	// victims; PreemptionDeviceHoursLost the device-hours of runs they cut
	// short.
	Preemptions               int     `json:"preemptions"`
	PreemptedPods             int     `json:"preemptedPods"`
	PreemptionDeviceHoursLost float64 `json:"preemptionDeviceHoursLost"`
	// ShortWaits counts the preemptors that waited for gangs that
	// declared their end instead of evicting (--preemption-short-wait).
	ShortWaits int `json:"shortWaits"`
	// GangRestarts: gangs restarted whole after losing a member;
	// FailureDeviceHoursLost: device-hours of runs failures cut short.
	GangRestarts           int                   `json:"gangRestarts"`
	FailureDeviceHoursLost float64               `json:"failureDeviceHoursLost"`
	Fragmentation          []DomainFragmentation `json:"fragmentation"`
	Seed002                Seed002               `json:"seed002"`
	ByPriority             []PriorityReport      `json:"byPriority"`
	// Decisions counts the decisions the core made, PreemptionSearches
	// those that searched for victims; CheapSkips the attempts the
	// capacity check spared the core.
	Decisions          int `json:"decisions"`
	PreemptionSearches int `json:"preemptionSearches"`
	CheapSkips         int `json:"cheapSkips"`
	// JobDetails are every job's fate (only with --job-details).
	JobDetails []JobReport `json:"jobDetails,omitempty"`

	// Samples are the run's state after each instant (the HTML
	// report's time series); Waits every started job's wait, seconds.
	Samples []Sample  `json:"-"`
	Waits   []float64 `json:"-"`
}

// Percentiles of a set of durations, in seconds; null when the set is
// empty.
type Percentiles struct {
	Count int      `json:"count"`
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
	P99   *float64 `json:"p99"`
}

// DomainFragmentation is how free devices were spread in one domain over
// the horizon: the largest free block is the most devices free on one
// node (what the largest one-node pod could get).
type DomainFragmentation struct {
	Domain  string `json:"domain"`
	Devices int    `json:"devices"`
	// MeanFree and MeanLargestFreeBlock are time-weighted means;
	// MinLargestFreeBlock the least seen.
	MeanFree             float64 `json:"meanFree"`
	MeanLargestFreeBlock float64 `json:"meanLargestFreeBlock"`
	MinLargestFreeBlock  int     `json:"minLargestFreeBlock"`
}

// Seed002 are the four measurements seed 002 asks for.
type Seed002 struct {
	// TimeToInitiallyScheduledSeconds: from a job's creation to its group
	// being admitted whole (its first run).
	TimeToInitiallyScheduledSeconds Percentiles `json:"timeToInitiallyScheduledSeconds"`
	// PendingGroupsByPriority: jobs waiting, by priority, over time.
	PendingGroupsByPriority []PendingByPriority `json:"pendingGroupsByPriority"`
	// PreemptionsAttributed: preemptions by the job that made them.
	PreemptionsAttributed []Attribution `json:"preemptionsAttributed"`
	// DeviceAllocationFailures: decisions that failed for want of devices,
	// by requested DeviceClass.
	DeviceAllocationFailures []ClassFailures `json:"deviceAllocationFailures"`
}

// PendingByPriority is the time-weighted mean and the most jobs of one
// priority waiting at once.
type PendingByPriority struct {
	Priority int32   `json:"priority"`
	Mean     float64 `json:"mean"`
	Max      int     `json:"max"`
}

// Attribution is the preemptions one job made.
type Attribution struct {
	Job         string `json:"job"`
	Priority    int32  `json:"priority"`
	Preemptions int    `json:"preemptions"`
}

// ClassFailures counts failed decisions for one DeviceClass.
type ClassFailures struct {
	DeviceClass string `json:"deviceClass"`
	Decisions   int    `json:"decisions"`
}

// PriorityReport is a scheduler's run restricted to the jobs of one
// priority.
type PriorityReport struct {
	Priority         int32 `json:"priority"`
	Jobs             int   `json:"jobs"`
	JobsCompleted    int   `json:"jobsCompleted"`
	JobsNeverStarted int   `json:"jobsNeverStarted"`
	// MakespanSeconds is from the first arrival to the last completion of
	// this priority's jobs; null unless all of them completed.
	MakespanSeconds     *float64    `json:"makespanSeconds"`
	WaitSeconds         Percentiles `json:"waitSeconds"`
	CompletionSeconds   Percentiles `json:"completionSeconds"`
	DeviceHoursHeldIdle float64     `json:"deviceHoursHeldIdle"`
	// Preempted counts the times this priority's jobs were preempted;
	// PreemptionDeviceHoursLost the device-hours of their runs that
	// preemption cut short (gangs restart whole: the work is lost).
	Preempted                 int     `json:"preempted"`
	PreemptionDeviceHoursLost float64 `json:"preemptionDeviceHoursLost"`
}

// JobReport is one job's fate under one scheduler.
type JobReport struct {
	Job            string  `json:"job"`
	Priority       int32   `json:"priority"`
	ArrivalSeconds float64 `json:"arrivalSeconds"`
	// StartSeconds is its first run; StartOrder its rank among the jobs'
	// first runs; Nodes the nodes its pods ran on then.
	StartSeconds *float64 `json:"startSeconds"`
	StartOrder   int      `json:"startOrder,omitempty"`
	Nodes        []string `json:"nodes,omitempty"`
	EndSeconds   *float64 `json:"endSeconds"`
	// State at the end: Completed, Running, Waiting, Deadlocked (waiting
	// and holding devices), NeverFit.
	State string `json:"state"`
	// DevicesHeld are the devices its pods held at the end, HeldOn their
	// nodes.
	DevicesHeld int      `json:"devicesHeld,omitempty"`
	HeldOn      []string `json:"heldOn,omitempty"`
	Restarts    int      `json:"restarts,omitempty"`
	Preempted   int      `json:"preempted,omitempty"`
}

// Job states at the end.
const (
	JobCompleted  = "Completed"
	JobRunning    = "Running"
	JobWaiting    = "Waiting"
	JobDeadlocked = "Deadlocked"
	JobNeverFit   = "NeverFit"
)

// Sample is a run's state after the decisions of one instant.
type Sample struct {
	At            time.Duration
	Running, Held int
	// Waiting and HeldByPrio by priority index (the workload's priorities,
	// highest first); Free devices and the Largest free block (devices
	// free on one node) by domain.
	Waiting, HeldByPrio []int
	Free, Largest       []int
}

// ForSteps calls f with each sample and how long (seconds) it held
// within [0, horizon]: until the next sample, the last until the horizon.
func ForSteps(samples []Sample, horizon time.Duration, f func(Sample, float64)) {
	for i, sm := range samples {
		if sm.At >= horizon {
			if sm.At == horizon && i == len(samples)-1 {
				f(sm, 0)
			}
			break
		}
		end := horizon
		if i+1 < len(samples) && samples[i+1].At < horizon {
			end = samples[i+1].At
		}
		f(sm, (end - sm.At).Seconds())
	}
}
