package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/simulate/report"
	"github.com/lockstep-dev/lockstep/internal/simulate/workload"
)

// Options of a simulation.
type Options struct {
	// Models to run (default: all, in Models order).
	Models []Model
	// Horizon ends the simulation; 0 runs until nothing is left to happen
	// under any model, and every model is measured up to the latest end.
	Horizon time.Duration
	// DomainLabel is the node label whose values are the domains
	// fragmentation is reported for (default DefaultDomainLabel).
	DomainLabel string
	// Sequential runs the models one after another (default: at once, one
	// goroutine each).
	Sequential bool
	// PreemptionShortWait and PreemptionDelay are the scheduler's
	// --preemption-short-wait and --preemption-delay (by PriorityClass):
	// a preemptor waits for gangs that declared they end soon instead of
	// evicting, and preempts nothing before its delay.
	PreemptionShortWait time.Duration
	PreemptionDelay     map[string]time.Duration

	// For tests: decide lone pods one at a time (noBatch), and without the
	// capacity check before each decision (noCheck).
	noBatch, noCheck bool
}

// GCPercent is the garbage collector's target `lockstep simulate` runs with
// (unless GOGC is set): a simulation allocates in short bursts over a
// working set of tens of megabytes, and at Go's default of 100 a quarter of
// its CPU went to collecting (BenchmarkWeek's profile); 400 trades a few
// hundred megabytes for most of that.
const GCPercent = 400

func (o Options) domainLabel() string {
	if o.DomainLabel == "" {
		return DefaultDomainLabel
	}
	return o.DomainLabel
}

// Run simulates the workload on the cluster under each model and reports
// what happened. The workload must have passed Check against the
// cluster.
func Run(ctx context.Context, cl *Cluster, wl *workload.Workload, opts Options) (*report.Report, error) {
	ms := opts.Models
	if len(ms) == 0 {
		ms = Models()
	}
	worlds := make([]*world, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		worlds[i] = newWorld(ctx, m, cl, wl, opts)
		run := func() { errs[i] = worlds[i].run(opts.Horizon) }
		if opts.Sequential {
			run()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return buildReport(cl, wl, worlds, opts), nil
}

// Check refuses, before anything runs, a workload the cluster cannot run:
// a claim template naming a DeviceClass neither has, a failure of a node
// or device the cluster does not have, and a job no node (or set of
// nodes) could ever hold — one that does not fit even the empty cluster
// (as Lockstep would place it: a gang whole, or one pod of a job of
// independent pods). Every error names the object and the field path.
func Check(ctx context.Context, cl *Cluster, wl *workload.Workload) error {
	var errs []error
	errs = append(errs, checkClasses(cl, wl)...)
	errs = append(errs, checkFailures(cl, wl)...)
	if len(errs) == 0 {
		f := newFitter(ctx, cl, wl)
		for _, j := range wl.Jobs {
			if ok, why := f.fits(j); !ok {
				errs = append(errs, &workload.ObjectError{Object: j.Ref(), Errs: field.ErrorList{field.Invalid(field.NewPath(j.Template), "",
					"no node of the cluster could ever hold it (it does not fit the empty cluster): "+why)}})
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", workload.ErrInvalid, errors.Join(errs...))
	}
	return nil
}

func checkClasses(cl *Cluster, wl *workload.Workload) []error {
	classes := map[string]bool{}
	for _, c := range append(append([]*resourcev1.DeviceClass(nil), cl.Classes...), wl.DeviceClasses...) {
		classes[c.Name] = true
	}
	var errs []error
	for _, key := range sortedNames(wl.ClaimTemplates) {
		t := wl.ClaimTemplates[key]
		path := field.NewPath("spec", "spec", "devices", "requests")
		if fe := checkRequests(t.Spec.Spec.Devices.Requests, path, classes); len(fe) > 0 {
			errs = append(errs, &workload.ObjectError{Object: "ResourceClaimTemplate " + key.String(), Errs: fe})
		}
	}
	for _, c := range wl.Claims {
		if fe := checkRequests(c.Spec.Devices.Requests, field.NewPath("spec", "devices", "requests"), classes); len(fe) > 0 {
			errs = append(errs, &workload.ObjectError{Object: "ResourceClaim " + c.Namespace + "/" + c.Name, Errs: fe})
		}
	}
	return errs
}

func checkRequests(reqs []resourcev1.DeviceRequest, path *field.Path, classes map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, r := range reqs {
		if r.Exactly != nil && !classes[r.Exactly.DeviceClassName] {
			errs = append(errs, field.Invalid(path.Index(i).Child("exactly", "deviceClassName"), r.Exactly.DeviceClassName, "no DeviceClass of this name in the cluster or the workload"))
		}
		for k, s := range r.FirstAvailable {
			if !classes[s.DeviceClassName] {
				errs = append(errs, field.Invalid(path.Index(i).Child("firstAvailable").Index(k).Child("deviceClassName"), s.DeviceClassName, "no DeviceClass of this name in the cluster or the workload"))
			}
		}
	}
	return errs
}

func sortedNames[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// shapeKey identifies what decides whether a job fits: how many pods must
// run together, its pods' specs and its groups' policies.
func shapeKey(j *workload.Job) string {
	type shape struct {
		Need   int
		Specs  []string
		Groups []lockv1.PodGroupSpec
		Of     []string
	}
	s := shape{Need: j.Need}
	index := map[string]int{}
	for _, g := range j.GroupOf {
		if _, ok := index[g]; !ok {
			index[g] = len(index)
		}
		s.Of = append(s.Of, strconv.Itoa(index[g]))
	}
	seen := map[string]bool{}
	for _, p := range j.Pods {
		b, _ := json.Marshal(p.Spec)
		if !seen[string(b)] {
			seen[string(b)] = true
			s.Specs = append(s.Specs, string(b))
		}
	}
	for _, pg := range j.Gangs {
		spec := *pg.Spec.DeepCopy()
		spec.WorkloadRef = nil
		s.Groups = append(s.Groups, spec)
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// checkFailures refuses a failure of a node or device the cluster lacks,
// a device name several drivers of the node have without a driver, and
// two failures of one node at once.
func checkFailures(cl *Cluster, wl *workload.Workload) []error {
	nodes := map[string]*corev1.Node{}
	for _, n := range cl.Nodes {
		nodes[n.Name] = n
	}
	var errs []error
	for i, f := range wl.Failures {
		spec := field.NewPath("spec")
		var fe field.ErrorList
		if nodes[f.Node] == nil {
			fe = append(fe, field.Invalid(spec.Child("node"), f.Node, "no node of this name in the cluster"))
		} else if f.Device != "" {
			drivers := 0
			for _, sl := range cl.Slices {
				if sl.Spec.NodeName != nil && *sl.Spec.NodeName == f.Node && (f.Driver == "" || sl.Spec.Driver == f.Driver) && hasDevice(sl, f.Device) {
					drivers++
				}
			}
			switch {
			case drivers == 0:
				fe = append(fe, field.Invalid(spec.Child("device"), f.Device, "node "+f.Node+" has no device of this name (of driver "+orAny(f.Driver)+")"))
			case drivers > 1:
				fe = append(fe, field.Required(spec.Child("driver"), "several drivers of node "+f.Node+" have a device "+f.Device+": name the driver"))
			}
		}
		for _, g := range wl.Failures[:i] {
			if g.Node == f.Node && overlaps(f, g) {
				fe = append(fe, field.Invalid(spec.Child("at"), f.At.String(), "node "+f.Node+" is already failed by "+g.Ref()+" then: one failure of a node at a time"))
			}
		}
		if len(fe) > 0 {
			errs = append(errs, &workload.ObjectError{Object: f.Ref(), Errs: fe})
		}
	}
	return errs
}

func hasDevice(sl *resourcev1.ResourceSlice, name string) bool {
	for _, d := range sl.Spec.Devices {
		if d.Name == name {
			return true
		}
	}
	return false
}

func orAny(driver string) string {
	if driver == "" {
		return "any"
	}
	return driver
}

// overlaps reports whether two failures are in effect at the same time.
func overlaps(a, b workload.Failure) bool {
	end := func(f workload.Failure) time.Duration {
		if f.RepairAfter == 0 {
			return time.Duration(1<<62 - 1)
		}
		return f.At + f.RepairAfter
	}
	return a.At < end(b) && b.At < end(a)
}

// fitter answers whether a job fits a cluster with nothing running, by
// Lockstep's decision (no preemption), once per shape of job.
type fitter struct {
	w    *world
	memo map[string]fitAnswer
}

type fitAnswer struct {
	ok  bool
	why string
}

func newFitter(ctx context.Context, cl *Cluster, wl *workload.Workload) *fitter {
	empty := &workload.Workload{PriorityClasses: wl.PriorityClasses, DeviceClasses: wl.DeviceClasses, ClaimTemplates: wl.ClaimTemplates, Claims: wl.Claims}
	return &fitter{w: newWorld(ctx, models[0], cl, empty, Options{}), memo: map[string]fitAnswer{}}
}

// fits decides the job's units on the empty cluster, binding each that
// fits before the next (a job of several gangs must fit whole), then
// takes everything away again.
func (f *fitter) fits(j *workload.Job) (bool, string) {
	key := shapeKey(j)
	if a, ok := f.memo[key]; ok {
		return a.ok, a.why
	}
	w := f.w
	// Not arrived: nothing of it is recorded or scheduled to happen.
	jr := &jobRun{spec: j, pods: map[types.UID]*podRun{}, generation: map[int]int{}, state: stateNotArrived}
	w.makeGroups(jr)
	for i := range j.Pods {
		w.createPod(jr, i)
	}
	a := fitAnswer{ok: true}
	for _, u := range append([]*unitRun(nil), w.units.items...) {
		d := decide.Decide(w.ctx, w.st.Snapshot(w.ctx, u.key, 0), w.st.CEL, decide.Input{Unit: w.resolve(u)})
		switch {
		case d.Kind == decide.Bind:
			w.bind(d)
		case d.Kind == decide.Error:
			a = fitAnswer{why: d.Err.Error()}
		case a.ok:
			a = fitAnswer{why: d.Summary}
			if d.Reason != "" && d.Summary == "" {
				a.why = d.Reason
			}
		}
	}
	for _, pr := range sortedPods(jr.pods) {
		w.removePod(pr)
	}
	for _, g := range jr.groups {
		delete(w.groups, types.NamespacedName{Namespace: g.pg.Namespace, Name: g.pg.Name})
	}
	if t := jr.tree; t != nil {
		delete(w.trees, types.NamespacedName{Namespace: t.root.Namespace, Name: t.root.Name})
	}
	w.units.items, w.events = nil, nil
	f.memo[key] = a
	return a.ok, a.why
}
