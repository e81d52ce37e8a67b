package simulate

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/preemption"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// bind carries out a Bind as the scheduler's binder writes it and the
// informers then show it: each pod bound to its node and running (kwok
// runs a bound pod at once), each claim allocated and reserved for its
// pods, the claim for a pod's DRA-backed extended resources created; a
// Lockstep PodGroup records its incarnation (podgroup.Record).
func (w *world) bind(d decide.Decision) {
	for _, n := range d.Leaves() {
		w.bindLeaf(d.Nodes[n].Unit, d.Tree.Leaves[n].Assignments)
	}
}

// bindLeaf binds one leaf's assignments (a PodGroup's, or lone pods').
func (w *world) bindLeaf(pu *podgroup.Unit, asgs []placement.Assignment) {
	now := metav1.NewTime(w.clk.Now())
	writes := map[types.NamespacedName]*resourcev1.ResourceClaim{}
	var keys []types.NamespacedName
	var bound []*corev1.Pod
	var jobs []*jobRun
	for _, a := range asgs {
		pr := w.pods[a.Pod.UID]
		p := pr.pod.DeepCopy()
		p.Spec.NodeName = a.Node
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &now
		devices := 0
		for i, c := range a.Claims {
			key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
			cur := writes[key]
			if cur == nil {
				cur = c.DeepCopy()
				if old := w.claims[key]; old != nil {
					cur.Status.ReservedFor = append([]resourcev1.ResourceClaimConsumerReference(nil), old.Status.ReservedFor...)
				}
				writes[key] = cur
				keys = append(keys, key)
			}
			cur.Status.ReservedFor = append(cur.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
			if a.NewlyAllocated[i] {
				devices += len(snapshot.ClaimDevices(c))
			}
		}
		if a.Extended != nil {
			c := a.Extended.Claim.DeepCopy()
			c.Name, c.UID = p.Name+"-extended-resources", types.UID("claim-"+p.Namespace+"-"+p.Name+"-extended-resources")
			c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
			p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{RequestMappings: a.Extended.Mappings, ResourceClaimName: c.Name}
			pr.claims = append(pr.claims, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
			devices += len(snapshot.ClaimDevices(c))
			w.putClaim(c)
		}
		devices += w.pluginDevices(pr.req, a.Node)
		pr.pod, pr.node, pr.devices = p, a.Node, devices
		w.st.Cache.UpdatePod(p)
		if w.onNode[a.Node] == nil {
			w.onNode[a.Node] = map[types.UID]*podRun{}
		}
		w.onNode[a.Node][p.UID] = pr
		w.rec.bound(pr, +1)
		bound = append(bound, p)
		if !containsJob(jobs, pr.job) {
			jobs = append(jobs, pr.job)
		}
	}
	for _, key := range keys {
		w.putClaim(writes[key])
	}
	w.changed++
	if pu.Group == nil || len(bound) == 0 {
		for _, j := range jobs {
			w.update(j)
		}
		return
	}
	if g := w.groups[types.NamespacedName{Namespace: pu.Group.Namespace, Name: pu.Group.Name}]; g != nil && !podgroup.Upstream(g.pg) {
		pg := g.pg.DeepCopy()
		pg.Status.Incarnation = podgroup.Record(pg.Status.Incarnation, int32(pu.MinCount()), g.podList(), bound, now)
		g.pg = pg
	}
	for _, j := range jobs {
		w.update(j)
	}
}

func containsJob(js []*jobRun, j *jobRun) bool {
	for _, x := range js {
		if x == j {
			return true
		}
	}
	return false
}

// pluginDevices counts the node-local extended resources (a device
// plugin's, e.g. nvidia.com/gpu) a pod requests (req) on node: devices
// too.
func (w *world) pluginDevices(req snapshot.Resources, node string) int {
	n := w.nodes[node]
	if n == nil {
		return 0
	}
	total := 0
	for name, v := range req.Scalar {
		if isDeviceResource(name) && !w.draResource(name) {
			if _, ok := n.Status.Allocatable[name]; ok {
				total += int(v)
			}
		}
	}
	return total
}

// isDeviceResource reports whether a node resource counts as devices: an
// extended resource (domain-qualified, not hugepages).
func isDeviceResource(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(s, "kubernetes.io/")
}

// update moves a job between waiting and running after its pods changed:
// a gang job runs while as many of its pods are bound as it needs (its
// runtime starts over each time it starts); a job of independent pods runs
// while any pod is bound, each pod finishing runtime after it started.
func (w *world) update(j *jobRun) {
	if j.state == stateDone || j.state == stateNotArrived {
		return
	}
	running := j.bound > 0
	if j.spec.Gang() {
		running = j.bound >= j.spec.Need
	}
	if !j.spec.Gang() {
		for _, pr := range sortedPods(j.pods) {
			if pr.node != "" && pr.epoch == 0 {
				pr.epoch = 1
				w.push(event{at: w.now + j.spec.Runtime, kind: evPodDone, pod: pr, epoch: 1})
			}
		}
	}
	switch {
	case running && j.state != stateRunning:
		j.epoch++
		j.runSince = w.now
		w.rec.setState(j, stateRunning)
		if !j.started {
			w.rec.start(j)
		}
		if j.spec.Gang() {
			w.push(event{at: w.now + j.spec.Runtime - j.saved, kind: evJobDone, job: j, epoch: j.epoch})
		}
	case !running && j.state == stateRunning:
		j.epoch++
		w.rec.setState(j, stateWaiting)
	}
}

// preempt evicts a plan's victims (as the scheduler does: a whole group
// with disruptionMode all, else the pods chosen), each replaced by its
// controller.
func (w *world) preempt(u *unitRun, d decide.Decision) {
	pods := 0
	var victims []*jobRun
	var now []preemption.Candidate
	for _, v := range d.Plan.Victims {
		j := w.jobOf(v)
		pods += len(v.Pods)
		if j == nil {
			continue
		}
		first := !containsJob(victims, j)
		if first {
			victims = append(victims, j)
			j.preempted++
		}
		if v.Notice > 0 && j.state == stateRunning && j.spec.Gang() {
			// Told first (scheduling.lockstep.dev/preemption-notice): a
			// job that saves acknowledges once it has; another runs out
			// the notice. The preemptor plans nothing meanwhile, and no
			// one else counts on the victim (the scheduler's nomination).
			if j.noticeUntil <= w.now {
				wait := v.Notice
				if j.spec.CheckpointInterval > 0 {
					wait = min(wait, j.spec.CheckpointDuration)
				}
				j.noticeUntil = w.now + wait
			}
			v := v
			w.push(event{at: j.noticeUntil, kind: evNoticeEnd, job: j, epoch: j.epoch, victim: &v, preemptor: u})
			u.noticed++
			continue
		}
		if first && j.state == stateRunning && j.spec.Gang() {
			// The run is cut short: what it did since it last saved is
			// lost.
			w.preemptionLost(j, w.cutShort(j, false))
		}
		now = append(now, v)
	}
	if u.noticed > 0 {
		// The rest are evicted now, but what they held is the
		// preemptor's until the noticed ones go too (its nomination):
		// they go together.
		u.noticedVictims = append(u.noticedVictims, now...)
	} else {
		for _, v := range now {
			w.evictCandidate(v)
		}
	}
	u.job.preemptions++
	w.rec.preemption(u.job, pods)
}

// jobOf is the job of a candidate's pods (nil when none is known).
func (w *world) jobOf(v preemption.Candidate) *jobRun {
	for _, p := range v.Pods {
		if pr := w.pods[p.UID]; pr != nil {
			return pr.job
		}
	}
	return nil
}

// cutShort ends a running gang job's run before it is done: the work
// since its last checkpoint is lost (none when saved — after a notice it
// used to save), the rest kept for its next run. It returns the
// device-seconds lost.
func (w *world) cutShort(j *jobRun, saved bool) float64 {
	ran := w.now - j.runSince
	keep := ran
	if !saved {
		keep = 0
		if every := j.spec.CheckpointInterval; every > 0 {
			keep = ran / every * every
		}
	}
	j.saved += keep
	return (ran - keep).Seconds() * float64(j.devices)
}

// preemptionLost counts device-seconds a preemption cost job j.
func (w *world) preemptionLost(j *jobRun, l float64) {
	j.workLostSeconds += l
	w.rec.preemptionLost += l
}

// noticeEnd evicts a victim whose notice is over: it saved (a job with a
// checkpoint interval, in its checkpoint duration) or ran out the
// notice. The run, if it still goes, ends here; pods replaced meanwhile
// (the run ended otherwise) are not the victim's and stay.
func (w *world) noticeEnd(e event) {
	j := e.job
	if j.epoch == e.epoch && j.state == stateRunning && !j.noticeOver {
		// Its run ends here (once, however many of its groups were told).
		j.noticeOver = true
		w.preemptionLost(j, w.cutShort(j, j.spec.CheckpointInterval > 0))
	}
	// What its victims free is the preemptor's (the scheduler's
	// nomination): they go together once the last notice is over, and it
	// is decided before anything else sees what they held.
	u := e.preemptor
	u.noticedVictims = append(u.noticedVictims, *e.victim)
	if u.noticed--; u.noticed > 0 {
		return
	}
	for _, v := range u.noticedVictims {
		if j := w.jobOf(v); j != nil {
			j.noticeUntil, j.noticeOver = 0, false
		}
		w.evictCandidate(v)
	}
	u.noticedVictims = nil
	if u.queued {
		w.attempt(u, false)
	}
}

func (w *world) evictCandidate(v preemption.Candidate) {
	pods := append([]*corev1.Pod(nil), v.Pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for _, p := range pods {
		if pr := w.pods[p.UID]; pr != nil {
			w.evict(pr)
		}
	}
}

// evict takes a bound pod down (preempted, lost, or taken down with its
// gang) and has its controller replace it.
func (w *world) evict(pr *podRun) {
	j := pr.job
	w.removePod(pr)
	if j.state != stateDone {
		if !j.spec.Gang() {
			// A job of independent pods makes the pod again.
			j.created--
		}
		w.createPod(j, pr.tmpl)
	}
	w.update(j)
}

// removePod deletes a pod and what its claims hold: claims made for it
// are deleted; a shared claim no longer reserved for anyone is
// deallocated (kube-controller-manager's resourceclaim controller).
func (w *world) removePod(pr *podRun) {
	p := pr.pod
	j := pr.job
	if pr.node != "" {
		delete(w.onNode[pr.node], p.UID)
		w.rec.bound(pr, -1)
		w.freed++
	}
	w.changed++
	w.st.Cache.DeletePod(p)
	for _, key := range pr.claims {
		w.dropClaim(key)
	}
	for _, key := range pr.shared {
		c := w.claims[key]
		if c == nil {
			continue
		}
		c = c.DeepCopy()
		kept := c.Status.ReservedFor[:0]
		for _, r := range c.Status.ReservedFor {
			if r.UID != p.UID {
				kept = append(kept, r)
			}
		}
		c.Status.ReservedFor = kept
		if len(kept) == 0 {
			c.Status.Allocation = nil
		}
		w.putClaim(c)
	}
	delete(w.pods, p.UID)
	delete(j.pods, p.UID)
	if pr.group != nil {
		delete(pr.group.pods, p.UID)
	}
	if pr.unit != nil {
		pr.unit.queued = false
	}
	pr.node = ""
}

// completeJob ends a gang job that ran its runtime whole: its pods
// succeed (and stop holding anything).
func (w *world) completeJob(j *jobRun) {
	for _, pr := range sortedPods(j.pods) {
		w.removePod(pr)
	}
	w.finish(j)
}

// completePod ends a pod of a job of independent pods; the job makes the
// next one while it has completions left.
func (w *world) completePod(pr *podRun) {
	j := pr.job
	w.removePod(pr)
	j.succeeded++
	if j.succeeded >= j.spec.Completions {
		for _, rest := range sortedPods(j.pods) {
			w.removePod(rest)
		}
		w.finish(j)
		return
	}
	w.createPod(j, pr.tmpl)
	w.update(j)
}

func (w *world) finish(j *jobRun) {
	for _, g := range j.groups {
		g.unit.queued = false
	}
	j.done, j.doneAt = true, w.now
	w.rec.setState(j, stateDone)
}

func sortedPods(m map[types.UID]*podRun) []*podRun {
	out := make([]*podRun, 0, len(m))
	for _, pr := range m {
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod.Name < out[j].pod.Name })
	return out
}
