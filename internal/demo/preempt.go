package demo

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
)

// runPreemption is seed 004's preemption: research (priority 100) runs 4
// ranks, then production (priority 10000) arrives needing 4 of the 6
// accelerators, 2 of which are free.
func runPreemption(ctx context.Context, e env, m mode, sc scenario, quiet time.Duration) ([]JobState, error) {
	client := e.client
	if err := setUp(ctx, client, sc); err != nil {
		return nil, err
	}
	low, high := sc.jobs[0], sc.jobs[1]
	if err := createJob(ctx, client, job(low, m, sc, ranks)); err != nil {
		return nil, err
	}
	if err := waitRunning(ctx, client, sc, low, ranks, time.Minute); err != nil {
		return nil, err
	}
	if err := createJob(ctx, client, job(high, m, sc, ranks)); err != nil {
		return nil, err
	}
	return settle(ctx, client, sc, quiet, 90*time.Second, ranks)
}

// waitRunning waits until the job has n Running pods.
func waitRunning(ctx context.Context, client kubernetes.Interface, sc scenario, job string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		states, err := observe(ctx, client, sc)
		if err != nil {
			return err
		}
		for _, s := range states {
			if s.Job == job && s.Running == n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return fmt.Errorf("job %s did not get %d running ranks within %s", job, n, limit)
}
