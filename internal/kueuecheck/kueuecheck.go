// Package kueuecheck is Lockstep's answer to Kueue's admission check
// (controllerName scheduling.lockstep.dev/placement), as values: which of a
// Kueue Workload's checks are Lockstep's and pending, the pods its pod sets
// will become (so the scheduler's own decision can judge them before they
// exist), the node selectors that pin each pod set to the domain the
// decision chose, and the Workload and AdmissionCheck as they must be
// written. It reads and writes unstructured objects: Kueue's module is not
// a dependency, its API is (kueue.x-k8s.io/v1beta2).
package kueuecheck

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ControllerName is the AdmissionCheck controllerName Lockstep answers.
const ControllerName = "scheduling.lockstep.dev/placement"

// Kueue's resources Lockstep reads and writes.
var (
	WorkloadResource   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
	CheckResource      = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "admissionchecks"}
	FlavorResource     = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	LocalQueueResource = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
)

// Check states (Kueue's CheckState).
const (
	StatePending = "Pending"
	StateReady   = "Ready"
	StateRetry   = "Retry"
)

// Ours reports whether an AdmissionCheck is answered by Lockstep.
func Ours(ac *unstructured.Unstructured) bool {
	name, _, _ := unstructured.NestedString(ac.Object, "spec", "controllerName")
	return name == ControllerName
}

// PendingChecks are the names of wl's admission checks that ours reports
// as Lockstep's and that wait for an answer: Kueue has reserved quota for
// wl (QuotaReserved=True), it is not finished or evicted, and the check's
// state is Pending. Sorted; none otherwise.
func PendingChecks(wl *unstructured.Unstructured, ours func(name string) bool) []string {
	conds := conditions(wl)
	if !meta.IsStatusConditionTrue(conds, "QuotaReserved") || meta.IsStatusConditionTrue(conds, "Finished") || meta.IsStatusConditionTrue(conds, "Evicted") {
		return nil
	}
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	var out []string
	for _, c := range checks {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		state, _ := m["state"].(string)
		if state == StatePending && ours(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func conditions(obj *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var out []metav1.Condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			out = append(out, c)
		}
	}
	return out
}

// LastRetried is when Kueue reset the named check to Pending after it had
// been retried (Kueue counts its retries and stamps the reset); ok is
// false for a check never retried.
func LastRetried(wl *unstructured.Unstructured, name string) (at time.Time, ok bool) {
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	for _, c := range checks {
		m, _ := c.(map[string]any)
		if m["name"] != name || number(m["retryCount"]) == 0 {
			continue
		}
		ts, _ := m["lastTransitionTime"].(string)
		t, err := time.Parse(time.RFC3339, ts)
		return t, err == nil
	}
	return time.Time{}, false
}

// ClusterQueue is the ClusterQueue wl's quota is reserved in, else the
// one its LocalQueue (spec.queueName) feeds; localQueue returns a
// LocalQueue by namespace and name. "" when unknown.
func ClusterQueue(wl *unstructured.Unstructured, localQueue func(ns, name string) (*unstructured.Unstructured, error)) string {
	if cq, _, _ := unstructured.NestedString(wl.Object, "status", "admission", "clusterQueue"); cq != "" {
		return cq
	}
	q, _, _ := unstructured.NestedString(wl.Object, "spec", "queueName")
	if q == "" {
		return ""
	}
	cq, _ := ClusterQueueOf(localQueue)(wl.GetNamespace(), q)
	return cq
}

// ClusterQueueOf names the ClusterQueue a LocalQueue feeds (its
// spec.clusterQueue), the LocalQueue read by localQueue; the error is
// localQueue's (podgroup.ClusterQueueOf: the words of a workload Kueue
// holds name it).
func ClusterQueueOf(localQueue func(ns, name string) (*unstructured.Unstructured, error)) func(ns, name string) (string, error) {
	return func(ns, name string) (string, error) {
		lq, err := localQueue(ns, name)
		if err != nil {
			return "", err
		}
		cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
		return cq, nil
	}
}

// Waiting reports whether wl waits for quota: active, not finished, and
// its quota not reserved.
func Waiting(wl *unstructured.Unstructured) bool {
	conds := conditions(wl)
	if active, found, _ := unstructured.NestedBool(wl.Object, "spec", "active"); found && !active {
		return false
	}
	return !meta.IsStatusConditionTrue(conds, "QuotaReserved") && !meta.IsStatusConditionTrue(conds, "Finished")
}

// PodSet is one of a Workload's pod sets as the pods it will become.
type PodSet struct {
	Name string
	Pods []*corev1.Pod
}

// PodSets are the pods wl's pod sets will become once Kueue admits it —
// count of each, from its template, named <workload>-<pod set>-<i> with a
// UID no real pod has — so a decision can judge them before they exist.
// owner, when set, is the controller reference the real pods will carry
// (a Job gang counts only its Job's pods).
func PodSets(wl *unstructured.Unstructured, owner *metav1.OwnerReference) ([]PodSet, error) {
	raw, _, err := unstructured.NestedSlice(wl.Object, "spec", "podSets")
	if err != nil {
		return nil, fmt.Errorf("workload %s/%s: spec.podSets: %w", wl.GetNamespace(), wl.GetName(), err)
	}
	var out []PodSet
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("workload %s/%s: spec.podSets[%d] is not an object", wl.GetNamespace(), wl.GetName(), i)
		}
		name, _ := m["name"].(string)
		count := number(m["count"])
		tm, _, _ := unstructured.NestedMap(m, "template")
		var t corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tm, &t); err != nil {
			return nil, fmt.Errorf("workload %s/%s: spec.podSets[%s].template: %w", wl.GetNamespace(), wl.GetName(), name, err)
		}
		ps := PodSet{Name: name}
		for n := range count {
			p := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
			p.Namespace = wl.GetNamespace()
			p.Name = fmt.Sprintf("%s-%s-%d", wl.GetName(), name, n)
			p.UID = types.UID(fmt.Sprintf("kueue-check-%s-%s-%d", wl.GetUID(), name, n))
			p.CreationTimestamp = wl.GetCreationTimestamp()
			p.Status.Phase = corev1.PodPending
			if owner != nil {
				p.OwnerReferences = []metav1.OwnerReference{*owner}
			}
			ps.Pods = append(ps.Pods, p)
		}
		out = append(out, ps)
	}
	return out, nil
}

// PodSetUpdate is what a Ready check asks Kueue to add to one pod set's
// pods: the node selector pinning them to the domain the decision chose.
type PodSetUpdate struct {
	Name         string
	NodeSelector map[string]string
}

// Pins are, per pod set, the node selector of the domain its placed pods
// share: for each of keys (the topology keys of the pods' groups and
// their tree), the value every node the pod set was placed on carries.
// A key the nodes disagree on, or do not all carry, is left out; a pod
// set with nothing to pin gets no update.
func Pins(sets []PodSet, nodeOf map[types.UID]string, labels func(node string) map[string]string, keys []string) []PodSetUpdate {
	var out []PodSetUpdate
	for _, ps := range sets {
		sel := map[string]string{}
		for _, k := range keys {
			value, ok, seen := "", true, false
			for _, p := range ps.Pods {
				node, placed := nodeOf[p.UID]
				if !placed {
					continue
				}
				v, has := labels(node)[k]
				if !has || seen && v != value {
					ok = false
					break
				}
				value, seen = v, true
			}
			if ok && seen {
				sel[k] = value
			}
		}
		if len(sel) > 0 {
			out = append(out, PodSetUpdate{Name: ps.Name, NodeSelector: sel})
		}
	}
	return out
}

// SetChecks returns wl with each named admission check set to state and
// message (and, for Ready, the pod set updates), its lastTransitionTime
// now. wl is not changed.
func SetChecks(wl *unstructured.Unstructured, names []string, state, message string, updates []PodSetUpdate, now time.Time) (*unstructured.Unstructured, error) {
	out := wl.DeepCopy()
	checks, _, err := unstructured.NestedSlice(out.Object, "status", "admissionChecks")
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for i, c := range checks {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if name, _ := m["name"].(string); !want[name] {
			continue
		}
		m["state"] = state
		m["message"] = truncate(message)
		m["lastTransitionTime"] = now.UTC().Format(time.RFC3339)
		delete(m, "podSetUpdates")
		// No requeueAfterSeconds: Kueue v0.17 keeps the quota reserved
		// until a Retry's delay ends, which is what the check prevents.
		// Without one it evicts at once, and a workload evicted by an
		// admission check queues by its eviction time, behind the
		// workloads that waited for its quota.
		delete(m, "requeueAfterSeconds")
		if state == StateReady && len(updates) > 0 {
			var us []any
			for _, u := range updates {
				sel := map[string]any{}
				for k, v := range u.NodeSelector {
					sel[k] = v
				}
				us = append(us, map[string]any{"name": u.Name, "nodeSelector": sel})
			}
			m["podSetUpdates"] = us
		}
		checks[i] = m
	}
	if err := unstructured.SetNestedSlice(out.Object, checks, "status", "admissionChecks"); err != nil {
		return nil, err
	}
	return out, nil
}

// maxMessage is the longest message Kueue's API accepts for a check.
const maxMessage = 32768

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}

// Activate returns ac with its Active condition True (Kueue keeps a
// ClusterQueue whose checks are not active from admitting anything), or
// nil when it is already.
func Activate(ac *unstructured.Unstructured, now time.Time) (*unstructured.Unstructured, error) {
	conds := conditions(ac)
	if meta.IsStatusConditionTrue(conds, "Active") {
		return nil, nil
	}
	meta.SetStatusCondition(&conds, metav1.Condition{Type: "Active", Status: metav1.ConditionTrue, Reason: "Active",
		Message: "Lockstep's scheduler answers this check: whether the workload can be placed whole now", LastTransitionTime: metav1.NewTime(now), ObservedGeneration: ac.GetGeneration()})
	out := ac.DeepCopy()
	raw := make([]any, 0, len(conds))
	for i := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&conds[i])
		if err != nil {
			return nil, err
		}
		raw = append(raw, m)
	}
	if err := unstructured.SetNestedSlice(out.Object, raw, "status", "conditions"); err != nil {
		return nil, err
	}
	return out, nil
}

// number reads a count as unstructured JSON holds it (int64 from the API
// server's decoder, float64 from a generic one).
func number(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

// ApplyFlavors gives each pod set's pods what Kueue gives them when it
// admits wl in the flavors it reserved quota in
// (status.admission.podSetAssignments): each flavor's spec.nodeLabels as
// node selectors and its spec.tolerations. flavor returns a
// ResourceFlavor by name; one that does not exist is an error (Kueue
// would not admit the workload either).
func ApplyFlavors(sets []PodSet, wl *unstructured.Unstructured, flavor func(name string) (*unstructured.Unstructured, error)) error {
	raw, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	byName := map[string]*PodSet{}
	for i := range sets {
		byName[sets[i].Name] = &sets[i]
	}
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		ps := byName[name]
		if ps == nil {
			continue
		}
		flavors, _, _ := unstructured.NestedStringMap(m, "flavors")
		seen := map[string]bool{}
		names := make([]string, 0, len(flavors))
		for _, f := range flavors {
			if !seen[f] {
				seen[f] = true
				names = append(names, f)
			}
		}
		sort.Strings(names)
		for _, f := range names {
			rf, err := flavor(f)
			if err != nil {
				return fmt.Errorf("ResourceFlavor %s of pod set %s: %w", f, name, err)
			}
			nodeLabels, _, _ := unstructured.NestedStringMap(rf.Object, "spec", "nodeLabels")
			rawTol, _, _ := unstructured.NestedSlice(rf.Object, "spec", "tolerations")
			var tols []corev1.Toleration
			for _, t := range rawTol {
				tm, ok := t.(map[string]any)
				if !ok {
					continue
				}
				var tol corev1.Toleration
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tm, &tol); err != nil {
					return fmt.Errorf("ResourceFlavor %s: spec.tolerations: %w", f, err)
				}
				tols = append(tols, tol)
			}
			for _, p := range ps.Pods {
				if len(nodeLabels) > 0 && p.Spec.NodeSelector == nil {
					p.Spec.NodeSelector = map[string]string{}
				}
				for k, v := range nodeLabels {
					p.Spec.NodeSelector[k] = v
				}
				p.Spec.Tolerations = append(p.Spec.Tolerations, tols...)
			}
		}
	}
	return nil
}
