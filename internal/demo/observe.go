package demo

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// JobState is one row of a table.
type JobState struct {
	Job      string
	Priority int32
	Running  int
	Pending  int
	// Held are the accelerators (DRA GPUs allocated to the job's pods, or
	// example.com/accel requested by its bound pods) the job holds.
	Held int
}

func (s JobState) trains() bool { return s.Running == ranks }

// observe reads the state of the scenario's jobs.
func observe(ctx context.Context, client kubernetes.Interface, sc scenario) ([]JobState, error) {
	pods, err := client.CoreV1().Pods(sc.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	jobOf := map[string]string{}
	states := map[string]*JobState{}
	for _, j := range sc.jobs {
		states[j] = &JobState{Job: j, Priority: sc.priorities[j]}
	}
	for _, p := range pods.Items {
		j := p.Labels[jobLabel]
		st := states[j]
		if st == nil || p.DeletionTimestamp != nil {
			continue
		}
		jobOf[string(p.UID)] = j
		switch p.Status.Phase {
		case corev1.PodRunning:
			st.Running++
		case corev1.PodPending:
			st.Pending++
		}
		if sc.acc == extended && p.Spec.NodeName != "" && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending) {
			for _, c := range p.Spec.Containers {
				q := c.Resources.Requests["example.com/accel"]
				st.Held += int(q.Value())
			}
		}
	}
	if sc.acc == draGPU {
		claims, err := client.ResourceV1().ResourceClaims(sc.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, c := range claims.Items {
			if c.Status.Allocation == nil {
				continue
			}
			for _, r := range c.Status.ReservedFor {
				if st := states[jobOf[string(r.UID)]]; st != nil {
					st.Held += len(c.Status.Allocation.Devices.Results)
				}
			}
		}
	}
	out := make([]JobState, 0, len(sc.jobs))
	for _, j := range sc.jobs {
		out = append(out, *states[j])
	}
	return out, nil
}

// settle polls until the state has not changed for quiet and at least
// minPods pods exist, or until limit.
func settle(ctx context.Context, client kubernetes.Interface, sc scenario, quiet, limit time.Duration, minPods int) ([]JobState, error) {
	deadline := time.Now().Add(limit)
	var last []JobState
	since := time.Now()
	for time.Now().Before(deadline) {
		cur, err := observe(ctx, client, sc)
		if err != nil {
			return nil, err
		}
		if fmt.Sprint(cur) != fmt.Sprint(last) {
			last, since = cur, time.Now()
		}
		total := 0
		for _, s := range cur {
			total += s.Running + s.Pending
		}
		if total >= minPods && time.Since(since) >= quiet {
			return cur, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return last, nil
}

// cleanUp deletes the scenario's namespace and waits until it is gone, so
// the next scenario starts with every accelerator free.
func cleanUp(ctx context.Context, client kubernetes.Interface, ns string) error {
	if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
