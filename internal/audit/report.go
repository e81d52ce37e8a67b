package audit

import "time"

// Report is the result of an audit. Its JSON field names are stable: scripts
// rely on them.
type Report struct {
	// Window is the time the audit could see.
	Window Window `json:"window"`
	// Totals sum the workloads reported.
	Totals Totals `json:"totals"`
	// Workloads are those that were or are partial, or that a preemption
	// left partly alive, while holding devices; sorted by namespace, kind
	// and name.
	Workloads []Workload `json:"workloads"`
	// Deadlocks are the sets of workloads partial now each of which needs a
	// resource another of the set holds.
	Deadlocks []Deadlock `json:"deadlocks"`
	// Estimates say what was estimated rather than read, and why.
	Estimates []string `json:"estimates"`
	// Notes say what the audit left out (and why): kinds it could not
	// read, independent replicas, workloads that held no devices.
	Notes []string `json:"notes"`
}

// Window is the span of time the audit reconstructs: from the earliest
// creation among the pods (and preemption events) it read to the audit.
type Window struct {
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Seconds float64   `json:"seconds"`
	// Basis says what the window is made of.
	Basis string `json:"basis"`
}

// WindowBasis is Window.Basis: what the audit cannot see.
const WindowBasis = "reconstructed from the objects that still exist: pods deleted before the audit (and their jobs' earlier runs) are not seen; preemption events older than the API server's event TTL (1h by default) are not seen"

// Totals are the sums over the workloads reported.
type Totals struct {
	// Workloads reported.
	Workloads int `json:"workloads"`
	// PartialNow are partial at the audit; Deadlocked of them in a deadlock.
	PartialNow int `json:"partialNow"`
	Deadlocked int `json:"deadlocked"`
	// Preemptions that left a workload partly alive.
	Preemptions int `json:"preemptions"`
	// WouldBeGangs: of the workloads reported, those Lockstep makes (or
	// would make) gangs.
	WouldBeGangs int `json:"wouldBeGangs"`
	// DeviceHoursHeld is the sum over every device kind of the hours
	// devices were held by workloads that could not run (partial);
	// ByResource splits it by extended resource or DeviceClass.
	DeviceHoursHeld               float64            `json:"deviceHoursHeld"`
	DeviceHoursHeldByResource     map[string]float64 `json:"deviceHoursHeldByResource"`
	DeviceHoursHeldByWouldBeGangs float64            `json:"deviceHoursHeldByWouldBeGangs"`
}

// Workload is one workload that was partial.
type Workload struct {
	Namespace  string `json:"namespace"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Gang is the gang of a job made of several (a LeaderWorkerSet's
	// replica), each reported on its own.
	Gang string `json:"gang,omitempty"`
	// SchedulerName is its pods' (the first one's).
	SchedulerName string `json:"schedulerName"`
	// Pods is how many of its pods the audit saw.
	Pods int `json:"pods"`
	// Required is how many pods it needs running (or finished) together,
	// RequiredFrom where that number comes from.
	Required     int    `json:"required"`
	RequiredFrom string `json:"requiredFrom"`
	// Now is its state at the audit.
	Now State `json:"now"`
	// PartialNow: partial at the audit (since PartialSince).
	PartialNow   bool       `json:"partialNow"`
	PartialSince *time.Time `json:"partialSince,omitempty"`
	// Deadlocked: partial now, in a cycle of workloads each needing what
	// another holds (WaitsFor: the workloads it waits on, as
	// namespace/kind/name, /gang for one gang of a job of several).
	Deadlocked bool     `json:"deadlocked"`
	WaitsFor   []string `json:"waitsFor,omitempty"`
	// FirstPartial is the start of its first counted partial episode;
	// PartialSeconds their total length.
	FirstPartial   *time.Time `json:"firstPartial,omitempty"`
	PartialSeconds float64    `json:"partialSeconds"`
	// DeviceHoursHeld are the device-hours its pods held while it was
	// partial, in all and by resource.
	DeviceHoursHeld           float64            `json:"deviceHoursHeld"`
	DeviceHoursHeldByResource map[string]float64 `json:"deviceHoursHeldByResource"`
	// Preemptions of its pods that left it partly alive.
	Preemptions []Preemption `json:"preemptions,omitempty"`
	// Lockstep says whether Lockstep makes (or would make) it gangs.
	Lockstep Verdict `json:"lockstep"`
	// Estimated says which of its figures rest on estimates.
	Estimated []string `json:"estimated,omitempty"`
}

// State is a workload at the audit.
type State struct {
	// Running pods hold their node (bound, not finished); Finished ended
	// successfully; Pending wait for a node and are needed to run.
	Running  int `json:"running"`
	Finished int `json:"finished"`
	Pending  int `json:"pending"`
	// Held are the devices its running pods hold, by resource.
	Held map[string]int64 `json:"held"`
}

// Preemption is a pod of a workload disrupted while siblings kept running
// and fewer than the workload requires were left.
type Preemption struct {
	Pod string `json:"pod"`
	// Reason is the DisruptionTarget condition's reason
	// (PreemptionByScheduler, EvictionByEvictionAPI, …) or "Preempted"
	// for a Preempted event whose pod is gone; Message its message.
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
	// Survivors are the siblings still running after it.
	Survivors int `json:"survivors"`
	// DeviceHoursHeldAfter are the device-hours the workload held from
	// the preemption until it ran whole again, held nothing, or the audit.
	DeviceHoursHeldAfter float64 `json:"deviceHoursHeldAfter"`
	// Source is "pod" (its DisruptionTarget condition) or "event" (a
	// Preempted event; AttributedBy says how it was tied to the workload:
	// "uid", or "name" when the pod is gone and its generated name matched
	// a sibling's).
	Source       string `json:"source"`
	AttributedBy string `json:"attributedBy,omitempty"`
}

// Verdict says whether Lockstep makes the workload gangs.
type Verdict struct {
	// Gang: Lockstep makes or would make it gangs; Already: it is a gang
	// now (Lockstep schedules it, or its in-tree gang policy).
	Gang    bool `json:"gang"`
	Already bool `json:"already"`
	// Reason: for a gang how (scheduled by Lockstep as PodGroup x, or
	// would be with schedulerName: lockstep); else the condition that
	// fails. Fix says how to make it one.
	Reason string `json:"reason"`
	Fix    string `json:"fix,omitempty"`
}

// Deadlock is a set of workloads partial now, each needing a resource
// another of them holds.
type Deadlock struct {
	// Workloads as namespace/kind/name (/gang for one gang of a job of
	// several).
	Workloads []string `json:"workloads"`
	// Resources are those they wait on each other for.
	Resources []string `json:"resources"`
	// Held are the devices the set holds, by resource.
	Held map[string]int64 `json:"held"`
}
