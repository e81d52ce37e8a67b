//go:build soak

package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// violationGrace: how long a state that is legal for a moment (a gang below
// minCount until the integrity controller acts, a claim written before its
// pod's binding) may last before it counts.
const violationGrace = 15 * time.Second

// end is one incarnation end the observer saw.
type end struct {
	group  string
	number int32
	reason string
	detail string
	at     time.Time
}

// nodeLoss is a node the soak deleted and the groups it ran pods of.
type nodeLoss struct {
	node   string
	at     time.Time
	groups map[string]bool
}

// observer watches the soak namespace and checks its invariants continuously.
type observer struct {
	ns   string
	reg  *registry
	pods corelisters.PodLister
	cl   resourcelisters.ResourceClaimLister
	pgs  cache.GenericLister

	mu         sync.Mutex
	ends       []end
	losses     []nodeLoss
	below      map[string]time.Time // group → since when below minCount
	unbound    map[string]time.Time // claim → since when allocated to unbound pods
	violations []string
	flagged    map[string]bool
}

func newObserver(ctx context.Context, h *harness.Harness, ns string, reg *registry) (*observer, error) {
	o := &observer{ns: ns, reg: reg, below: map[string]time.Time{}, unbound: map[string]time.Time{}, flagged: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(h.Client, 0, informers.WithNamespace(ns))
	o.pods = f.Core().V1().Pods().Lister()
	o.cl = f.Resource().V1().ResourceClaims().Lister()
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(h.Dynamic, 0, ns, nil)
	inf := df.ForResource(podgroup.Resource)
	o.pgs = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: o.onGroup}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	df.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	df.WaitForCacheSync(ctx.Done())
	return o, nil
}

// onGroup records every incarnation end the first time it is seen.
func (o *observer) onGroup(oldObj, newObj any) {
	oldPG, err1 := podgroup.FromUnstructured(oldObj.(*unstructured.Unstructured))
	newPG, err2 := podgroup.FromUnstructured(newObj.(*unstructured.Unstructured))
	if err1 != nil || err2 != nil {
		return
	}
	inc := newPG.Status.Incarnation
	if inc == nil || inc.Ended == nil {
		return
	}
	if prev := oldPG.Status.Incarnation; prev != nil && prev.Number == inc.Number && prev.Ended != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ends = append(o.ends, end{group: newPG.Name, number: inc.Number, reason: inc.Ended.Reason, detail: inc.Ended.Message, at: time.Now()})
}

// lost records a node deletion with the groups it ran pods of.
func (o *observer) lost(node string) {
	groups := map[string]bool{}
	pods, _ := o.pods.List(labels.Everything())
	for _, p := range pods {
		if p.Spec.NodeName == node && podgroup.Active(p) {
			groups[podgroup.GroupOf(p)] = true
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.losses = append(o.losses, nodeLoss{node: node, at: time.Now(), groups: groups})
}

func (o *observer) violate(key, msg string) {
	if o.flagged[key] {
		return
	}
	o.flagged[key] = true
	o.violations = append(o.violations, fmt.Sprintf("%s %s", time.Now().Format("15:04:05"), msg))
}

// check runs the continuous invariants once.
func (o *observer) check(now time.Time) {
	pods, _ := o.pods.List(labels.Everything())
	byGroup := map[string][]*corev1.Pod{}
	byUID := map[string]*corev1.Pod{}
	for _, p := range pods {
		byUID[string(p.UID)] = p
		if g := podgroup.GroupOf(p); g != "" {
			byGroup[g] = append(byGroup[g], p)
		}
	}
	objs, _ := o.pgs.List(labels.Everything())
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := map[string]bool{}
	for _, obj := range objs {
		pg, err := podgroup.FromUnstructured(obj.(*unstructured.Unstructured))
		if err != nil || pg.Status.Incarnation == nil || pg.Status.Incarnation.Ended != nil {
			continue
		}
		// Members that count toward minCount: bound and staying, or done —
		// by their pods, or by the record for ranks that finished and whose
		// pods are gone (a node lost with them, say).
		holds, present := 0, map[string]bool{}
		for _, p := range byGroup[pg.Name] {
			present[string(p.UID)] = true
			if podgroup.Holds(p, pg.Status.Incarnation) {
				holds++
			}
		}
		for _, m := range pg.Status.Incarnation.Members {
			if m.Outcome == lockv1.MemberSucceeded && !present[string(m.UID)] {
				holds++
			}
		}
		if holds == 0 || holds >= podgroup.MinCount(pg) {
			delete(o.below, pg.Name)
			continue
		}
		seen[pg.Name] = true
		since, ok := o.below[pg.Name]
		if !ok {
			o.below[pg.Name] = now
		} else if now.Sub(since) > violationGrace {
			o.violate("below/"+pg.Name+fmt.Sprint(pg.Status.Incarnation.Number), fmt.Sprintf("PodGroup %s incarnation %d: %d of minCount %d members for %s", pg.Name, pg.Status.Incarnation.Number, holds, podgroup.MinCount(pg), now.Sub(since).Round(time.Second)))
		}
	}
	for g := range o.below {
		if !seen[g] {
			delete(o.below, g)
		}
	}
	claims, _ := o.cl.List(labels.Everything())
	held := map[string]bool{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		bound := false
		for _, r := range c.Status.ReservedFor {
			if p := byUID[string(r.UID)]; p != nil && p.Spec.NodeName != "" {
				bound = true
			}
		}
		if bound {
			continue
		}
		held[c.Name] = true
		since, ok := o.unbound[c.Name]
		if !ok {
			o.unbound[c.Name] = now
		} else if now.Sub(since) > violationGrace {
			o.violate("claim/"+c.Name, fmt.Sprintf("claim %s holds a device for %s with no bound pod (reservedFor %d)", c.Name, now.Sub(since).Round(time.Second), len(c.Status.ReservedFor)))
		}
	}
	for c := range o.unbound {
		if !held[c] {
			delete(o.unbound, c)
		}
	}
}

// judgeEnds checks that every restart had a real cause of its reason.
func (o *observer) judgeEnds() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.ends {
		g := o.reg.get(e.group)
		key := fmt.Sprintf("end/%s/%d", e.group, e.number)
		nodeLost := false
		for _, l := range o.losses {
			if l.groups[e.group] && !e.at.Before(l.at) && e.at.Sub(l.at) < 2*time.Minute {
				nodeLost = true
			}
		}
		switch e.reason {
		case integrity.ReasonMemberFailed:
			if g == nil || g.fate != fateFail {
				o.violate(key, fmt.Sprintf("%s incarnation %d restarted MemberFailed but no rank of it was made to fail: %s", e.group, e.number, e.detail))
			}
		case integrity.ReasonNodeLost:
			if !nodeLost {
				o.violate(key, fmt.Sprintf("%s incarnation %d restarted NodeLost but no node of it was deleted: %s", e.group, e.number, e.detail))
			}
		case integrity.ReasonMemberLost, integrity.ReasonDeviceFailed:
			o.violate(key, fmt.Sprintf("%s incarnation %d restarted %s without a cause of that kind (node lost: %v): %s", e.group, e.number, e.reason, nodeLost, e.detail))
		case lockv1.PodGroupReasonPreemption, integrity.ReasonCompleted, integrity.ReasonOwnerStopped:
		default:
			o.violate(key, fmt.Sprintf("%s incarnation %d ended with unknown reason %q", e.group, e.number, e.reason))
		}
	}
}

// report is the soak's table.
func (o *observer) report(d time.Duration) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	byReason := map[string]int{}
	for _, e := range o.ends {
		byReason[e.reason]++
	}
	var reasons []string
	for r, n := range byReason {
		reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
	}
	sort.Strings(reasons)
	fates := o.reg.count()
	total := 0
	for _, n := range fates {
		total += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s, %d gangs (succeed %d, fail %d, urgent %d, node-loss candidates %d), %d nodes deleted\n",
		d.Round(time.Second), total, fates[fateSucceed], fates[fateFail], fates[fateUrgent], fates[fateNode], len(o.losses))
	fmt.Fprintf(&b, "incarnation ends: %s\n", strings.Join(reasons, ", "))
	fmt.Fprintf(&b, "violations: %d\n", len(o.violations))
	for _, v := range o.violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}
