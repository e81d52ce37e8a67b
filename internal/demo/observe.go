package demo

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// JobState is one row of the table.
type JobState struct {
	Job     string
	Running int
	Pending int
	// GPUs allocated to the job's pods.
	GPUs int
}

func (s JobState) trains() bool { return s.Running == ranks }

// observe reads the state of every job.
func observe(ctx context.Context, client kubernetes.Interface) ([]JobState, error) {
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claims, err := client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	jobOf := map[string]string{}
	states := map[string]*JobState{}
	for _, j := range jobs {
		states[j] = &JobState{Job: j}
	}
	for _, p := range pods.Items {
		j := p.Labels["demo.lockstep.dev/job"]
		st := states[j]
		if st == nil {
			continue
		}
		jobOf[string(p.UID)] = j
		switch {
		case p.Status.Phase == corev1.PodRunning:
			st.Running++
		case p.Status.Phase == corev1.PodPending:
			st.Pending++
		}
	}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if st := states[jobOf[string(r.UID)]]; st != nil {
				st.GPUs += len(c.Status.Allocation.Devices.Results)
			}
		}
	}
	out := make([]JobState, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, *states[j])
	}
	return out, nil
}

// settle polls until the state has not changed for quiet, all pods of both
// jobs exist, or until limit.
func settle(ctx context.Context, client kubernetes.Interface, quiet, limit time.Duration) ([]JobState, error) {
	deadline := time.Now().Add(limit)
	var last []JobState
	since := time.Now()
	for time.Now().Before(deadline) {
		cur, err := observe(ctx, client)
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
		if total == len(jobs)*ranks && time.Since(since) >= quiet {
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
