package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/preemption"
)

// interruptionTaints are node taints that announce, with notice, that
// the node goes: Karpenter's disruption taint (set before it drains a
// node it is interrupting, expiring or otherwise taking away) and the AWS
// Node Termination Handler's for a Spot interruption, an Auto Scaling
// termination and scheduled maintenance. (A rebalance recommendation is
// no decision, and is not one.)
var interruptionTaints = map[string]bool{
	"karpenter.sh/disruption":                                true,
	"aws-node-termination-handler/spot-itn":                  true,
	"aws-node-termination-handler/asg-lifecycle-termination": true,
	"aws-node-termination-handler/scheduled-maintenance":     true,
}

// interruptionWindow is the longest notice an interrupted node allows: a
// Spot interruption comes two minutes ahead.
const interruptionWindow = 2 * time.Minute

// interruptionPoll is how often interrupted nodes are looked for, and
// the gangs told of them looked at (from the informer caches).
const interruptionPoll = 2 * time.Second

// interruptions are the gangs told that a node of theirs goes, by their
// candidate name.
type interruptions struct {
	mu   sync.Mutex
	told map[string]notice
}

// interruptionOf is the interruption taint of a node ("" for none).
func interruptionOf(n *corev1.Node) string {
	for _, t := range n.Spec.Taints {
		if interruptionTaints[t.Key] {
			return t.Key
		}
	}
	return ""
}

// watchInterruptions tells the gangs on interrupted nodes, every
// interruptionPoll.
func (s *Scheduler) watchInterruptions(ctx context.Context) {
	wait.UntilWithContext(ctx, s.interruptOnce, interruptionPoll)
}

// interruptOnce gives each gang (a group taken whole, of more than one
// member) with a member on a node that got an interruption taint the
// notice it asked for (preemption.Candidate.Notice), at most
// interruptionWindow, marked as for a preemption; a gang that asked for
// none, or acknowledged, or whose notice ended, has its incarnation ended
// (PodGroupReasonNodeInterrupted) so that the integrity controller
// restarts it whole elsewhere before the node takes part of it down.
func (s *Scheduler) interruptOnce(ctx context.Context) {
	nodes, err := s.listers.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	going := map[string]string{}
	for _, n := range nodes {
		if t := interruptionOf(n); t != "" {
			going[n.Name] = t
		}
	}
	s.interrupts.mu.Lock()
	defer s.interrupts.mu.Unlock()
	if len(going) == 0 && len(s.interrupts.told) == 0 {
		return
	}
	cands, err := s.candidates()
	if err != nil {
		return
	}
	now := s.clock.Now()
	if s.interrupts.told == nil {
		s.interrupts.told = map[string]notice{}
	}
	seen := map[string]bool{}
	for _, c := range cands {
		node, taint := interruptedNode(c, going)
		if node == "" || !c.Whole || len(c.Pods) < 2 || c.Terminating() || !s.runsIncarnation(c) {
			continue
		}
		seen[c.Name] = true
		n, told := s.interrupts.told[c.Name]
		if !told {
			if c.Notice <= 0 {
				s.endInterrupted(ctx, c, fmt.Sprintf("node %s is being interrupted (taint %s)", node, taint))
				continue
			}
			deadline := c.NoticeDeadline
			if deadline.IsZero() {
				deadline = now.Add(min(c.Notice, interruptionWindow)).Truncate(time.Second)
			}
			n = notice{victim: c, deadline: deadline}
			s.interrupts.told[c.Name] = n
			msg := fmt.Sprintf("Node %s is being interrupted (taint %s): checkpoint and set %s by %s; the gang then restarts whole elsewhere",
				node, taint, lockv1.CheckpointedAtAnnotation, deadline.UTC().Format(time.RFC3339))
			klog.FromContext(ctx).Info("Interruption notice", "victim", c.Name, "node", node, "taint", taint, "deadline", deadline)
			s.markNotice(ctx, c, deadline, msg)
			continue
		}
		c.NoticeDeadline = n.deadline
		if c.NoticeOver(now) || len(c.Pods) < len(n.victim.Pods) {
			s.endInterrupted(ctx, c, fmt.Sprintf("node %s is being interrupted (taint %s)", node, taint))
			delete(s.interrupts.told, c.Name)
		}
	}
	for name := range s.interrupts.told {
		if !seen[name] {
			delete(s.interrupts.told, name) // gone, or its node no longer goes
		}
	}
}

// runsIncarnation reports whether every group of c has a running
// incarnation (one already ended is being restarted: it is told nothing
// more).
func (s *Scheduler) runsIncarnation(c preemption.Candidate) bool {
	for _, key := range victimGroups(c) {
		pg, err := s.podGroup(key.Namespace, key.Name)
		if err != nil || pg == nil || pg.Status.Incarnation == nil || pg.Status.Incarnation.Ended != nil {
			return false
		}
	}
	return true
}

// interruptedNode is the first node of c's pods that goes, and its taint.
func interruptedNode(c preemption.Candidate, going map[string]string) (string, string) {
	for _, p := range c.Pods {
		if t, ok := going[p.Spec.NodeName]; ok {
			return p.Spec.NodeName, t
		}
	}
	return "", ""
}

// endInterrupted ends the running incarnation of each of c's groups
// (PodGroupReasonNodeInterrupted): the integrity controller evicts their
// members and the gang is placed whole again, off the tainted node.
func (s *Scheduler) endInterrupted(ctx context.Context, c preemption.Candidate, why string) {
	now := metav1.NewTime(s.clock.Now())
	for _, key := range victimGroups(c) {
		pg, err := s.podGroup(key.Namespace, key.Name)
		if err != nil || pg == nil {
			continue
		}
		msg := why + ": restarting the gang whole elsewhere"
		s.updateGroupStatus(ctx, pg, "interruption", func(cur *lockv1.PodGroup) bool {
			changed := clearNotice(cur, lockv1.PreemptionPendingReasonEvicted, "Evicted: "+msg)
			if inc := cur.Status.Incarnation; inc != nil && inc.Ended == nil {
				inc.Ended = &lockv1.PodGroupIncarnationEnd{Reason: lockv1.PodGroupReasonNodeInterrupted, Message: why, Time: now}
				changed = true
			}
			return changed
		})
		s.recorder.Eventf(pg, nil, corev1.EventTypeWarning, lockv1.PodGroupReasonNodeInterrupted, "Interrupting", "%s", msg)
	}
}
