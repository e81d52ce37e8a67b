package demo

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// runDeadlock is seed 004: two 4-rank jobs submitted at the same moment, as
// two teams would (the Job controller then creates their ranks interleaved).
func runDeadlock(ctx context.Context, e env, m mode, sc scenario, quiet time.Duration) ([]JobState, error) {
	client := e.client
	if err := setUp(ctx, client, sc); err != nil {
		return nil, err
	}
	parallelism := int32(ranks)
	if m.ramp {
		parallelism = 1
	}
	errs := make(chan error, len(sc.jobs))
	for _, name := range sc.jobs {
		go func() { errs <- createJob(ctx, client, job(name, m, sc, parallelism)) }()
	}
	var first error
	for range sc.jobs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	if m.ramp {
		if err := rampUp(ctx, client, sc); err != nil {
			return nil, err
		}
	}
	return settle(ctx, client, sc, quiet, 90*time.Second, len(sc.jobs)*ranks)
}

// rampUp raises both jobs' parallelism one rank at a time, alternately,
// waiting for each new rank to exist and the scheduler to act on it.
func rampUp(ctx context.Context, client kubernetes.Interface, sc scenario) error {
	for r := int32(2); r <= ranks; r++ {
		for _, name := range sc.jobs {
			patch := fmt.Sprintf(`{"spec":{"parallelism":%d}}`, r)
			if _, err := client.BatchV1().Jobs(sc.namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
			if err := waitRanks(ctx, client, sc.namespace, name, int(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitRanks waits until the job has n pods and each is bound or has been
// found unschedulable.
func waitRanks(ctx context.Context, client kubernetes.Interface, ns, job string, n int) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobLabel + "=" + job})
		if err != nil || len(pods.Items) < n {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" && !decided(&p) {
				return false, nil
			}
		}
		return true, nil
	})
}

// decided: the scheduler looked at the pod and could not place it (pod by
// pod), or it waits for its gang (Lockstep leaves it unconditioned until the
// group has minCount members, so a pending gang member counts as decided).
func decided(p *corev1.Pod) bool {
	if p.Spec.SchedulerName == lockv1.SchedulerName {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}
