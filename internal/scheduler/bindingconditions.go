package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// bindingConditionsTimeout is how long a binding waits for its devices'
// binding conditions (kube-scheduler's default BindingTimeout).
const bindingConditionsTimeout = 10 * time.Minute

// bindingConditionsPoll is how often the cached claims are looked at while
// waiting (no API call: the claim informer's cache).
const bindingConditionsPoll = 250 * time.Millisecond

// errBindingConditions marks a binding whose devices' binding conditions
// failed or did not come in time.
var errBindingConditions = errors.New("device binding conditions")

// needsBindingConditions reports whether an allocation has a device that
// must reach its binding conditions before the pod may bind (e.g. a device
// attached over a fabric by its driver after allocation).
func needsBindingConditions(a *resourcev1.AllocationResult) bool {
	if a == nil {
		return false
	}
	for _, r := range a.Devices.Results {
		if len(r.BindingConditions) > 0 {
			return true
		}
	}
	return false
}

// waitBindingConditions waits, as kube-scheduler's PreBind does, until
// every device of the written claims that has binding conditions reports
// them all True in the claim's status.devices — or fails when one of its
// binding failure conditions is True, or when bindingConditionsTimeout has
// passed since the allocation.
func (b *binder) waitBindingConditions(ctx context.Context, writes []*claimWrite) error {
	var waiting []*claimWrite
	for _, w := range writes {
		if w.newAlloc && needsBindingConditions(w.claim.Status.Allocation) {
			waiting = append(waiting, w)
		}
	}
	if len(waiting) == 0 || b.claimIndex == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Waiting for device binding conditions", "claims", len(waiting))
	deadline := b.clock.Now().Add(bindingConditionsTimeout)
	tick := b.clock.NewTicker(bindingConditionsPoll)
	defer tick.Stop()
	for {
		pending := 0
		for _, w := range waiting {
			obj, ok, err := b.claimIndex.GetByKey(w.claim.Namespace + "/" + w.claim.Name)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: claim %s/%s was deleted", errBindingConditions, w.claim.Namespace, w.claim.Name)
			}
			c := obj.(*resourcev1.ResourceClaim)
			if olderThan(c, w.written) {
				pending++ // the cache has not seen the allocation yet
				continue
			}
			ready, err := bindingConditionsMet(c)
			if err != nil {
				return err
			}
			if !ready {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		if b.clock.Now().After(deadline) {
			return fmt.Errorf("%w: %d claims did not reach their devices' binding conditions within %s", errBindingConditions, pending, bindingConditionsTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C():
		}
	}
}

// bindingConditionsMet reports whether every allocated device of c that has
// binding conditions has them all True; an error when a binding failure
// condition is True (or c lost its allocation).
func bindingConditionsMet(c *resourcev1.ResourceClaim) (bool, error) {
	if c.Status.Allocation == nil {
		return false, fmt.Errorf("%w: claim %s/%s lost its allocation", errBindingConditions, c.Namespace, c.Name)
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if len(r.BindingConditions) == 0 {
			continue
		}
		var conds []metav1.Condition
		for _, d := range c.Status.Devices {
			if d.Driver == r.Driver && d.Pool == r.Pool && d.Device == r.Device {
				conds = d.Conditions
				break
			}
		}
		for _, f := range r.BindingFailureConditions {
			if fc := apimeta.FindStatusCondition(conds, f); fc != nil && fc.Status == metav1.ConditionTrue {
				return false, fmt.Errorf("%w: device %s/%s of claim %s/%s reports %s (%s: %s)", errBindingConditions, r.Pool, r.Device, c.Namespace, c.Name, f, fc.Reason, fc.Message)
			}
		}
		for _, want := range r.BindingConditions {
			if !apimeta.IsStatusConditionTrue(conds, want) {
				return false, nil
			}
		}
	}
	return true, nil
}

// olderThan reports whether the cached object precedes the written one
// (resource versions compared as numbers, as kube-scheduler's assume cache
// does; one that is not a number is never older).
func olderThan(cached, written *resourcev1.ResourceClaim) bool {
	if written == nil {
		return false
	}
	a, err1 := strconv.ParseUint(cached.ResourceVersion, 10, 64)
	b, err2 := strconv.ParseUint(written.ResourceVersion, 10, 64)
	return err1 == nil && err2 == nil && a < b
}
