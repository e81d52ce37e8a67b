package explaincmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockstep-dev/lockstep/internal/explain"
)

// listLimit is how many entries of each evidence list the default output
// shows: on a cluster of thousands of nodes "every node with a matching
// device" would bury the answer.
const listLimit = 10

// shown is how many of n entries to print; more reports the ones left out.
func shown(n int, wide bool) int {
	if wide || n <= listLimit {
		return n
	}
	return listLimit
}

func more(out io.Writer, n, shown int, what string) {
	if n > shown {
		fmt.Fprintf(out, "   … %d more %s (-o wide lists them)\n", n-shown, what)
	}
}

// printDeviceHealth prints what kubelets report of the members' devices:
// the count of Healthy ones, then each one that is not.
func printDeviceHealth(out io.Writer, r *explain.Report, wide bool) {
	if len(r.DeviceHealth) == 0 && r.HealthyDevices == 0 {
		return
	}
	fmt.Fprintf(out, "   Device health (kubelet): %d Healthy", r.HealthyDevices)
	if len(r.DeviceHealth) == 0 {
		fmt.Fprintln(out)
		return
	}
	fmt.Fprintf(out, ", %d not:\n", len(r.DeviceHealth))
	n := shown(len(r.DeviceHealth), wide)
	for _, d := range r.DeviceHealth[:n] {
		fmt.Fprintf(out, "   %s: %s\n", d.Pod, d)
	}
	more(out, len(r.DeviceHealth), n, "devices not Healthy")
}

// partly is ", 2 partly allocated (partitions)" when partitionable devices
// are, else "".
func partly(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d partly allocated (partitions)", n)
}

func printReport(out io.Writer, r *explain.Report, wide bool) {
	fmt.Fprintln(out, r.Answer)
	fmt.Fprintln(out)
	if r.Tree != "" {
		fmt.Fprintf(out, "%s is in the tree of %s, which the scheduler places as one unit (`explain compositepodgroup` draws it).\n", r.Unit, r.Tree)
	}
	if r.Condition != nil {
		fmt.Fprintf(out, "1. Condition PodGroupInitiallyScheduled=%s (%s): %s\n", r.Condition.Status, r.Condition.Reason, r.Condition.Message)
	} else {
		fmt.Fprintln(out, "1. Condition: none yet")
	}
	if r.State != nil {
		fmt.Fprintf(out, "   Condition Running=%s (%s): %s\n", r.State.Status, r.State.Reason, r.State.Message)
	}
	if inc := r.Incarnation; inc != nil {
		fmt.Fprintf(out, "   Incarnation %d: %d members bound %s", inc.Number, inc.Members, inc.BoundTime)
		if inc.Succeeded > 0 || inc.Removed > 0 {
			fmt.Fprintf(out, " (%d succeeded, %d removed by a scale-down)", inc.Succeeded, inc.Removed)
		}
		if inc.Ended != "" {
			fmt.Fprintf(out, "; ended — %s", inc.Ended)
		}
		fmt.Fprintln(out)
	}
	if c := r.LastRestart; c != nil {
		fmt.Fprintf(out, "   Last taken down whole %s (%s): %s\n", c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, c.Message)
	}
	if r.LastEvent != "" {
		fmt.Fprintf(out, "   Last event: %s\n", r.LastEvent)
	}
	printDeviceHealth(out, r, wide)
	policy := "basic"
	if r.Gang {
		policy = fmt.Sprintf("gang, minCount %d", r.MinCount)
	}
	fmt.Fprintf(out, "2. Members: %d exist (%d bound, %d pending); policy %s\n", r.Members, r.Bound, r.Pending, policy)
	for _, er := range r.ExtendedResources {
		fmt.Fprintf(out, "3. Extended resource %s: %d per pod; %d nodes advertise it, %d allocatable, %d free", er.Name, er.PerPod, er.Nodes, er.Total, er.Free)
		if er.DeviceClass != "" {
			fmt.Fprintf(out, "; elsewhere served by DRA through DeviceClass %s", er.DeviceClass)
		}
		fmt.Fprintln(out)
		if len(er.NotAllocatable) > 0 {
			fmt.Fprintf(out, "   %d nodes advertise capacity but not allocatable (the device plugin reports those devices unhealthy, or the kubelet has not registered them: check its pod and the node's kubelet):\n", len(er.NotAllocatable))
			n := shown(len(er.NotAllocatable), wide)
			for _, na := range er.NotAllocatable[:n] {
				fmt.Fprintf(out, "   %s\n", na)
			}
			more(out, len(er.NotAllocatable), n, "nodes")
		}
	}
	if len(r.Reasons) > 0 {
		fmt.Fprintf(out, "4. Nodes (%d) rejecting the first pod that does not fit:\n", r.Nodes)
		for _, rc := range r.Reasons {
			fmt.Fprintf(out, "   %d  %s\n", rc.Nodes, rc.Reason)
		}
	}
	if len(r.Claims) > 0 {
		fmt.Fprintln(out, "5. Claims of pending pods:")
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		n := shown(len(r.Claims), wide)
		for _, c := range r.Claims[:n] {
			fmt.Fprintf(tw, "   %s\t%s\t%s\n", c.Pod, c.Claim, c.State)
		}
		_ = tw.Flush()
		more(out, len(r.Claims), n, "claims")
	}
	for _, d := range r.Devices {
		if !d.Exists {
			fmt.Fprintf(out, "6. DeviceClass %s does not exist\n", d.Class)
			continue
		}
		fmt.Fprintf(out, "6. DeviceClass %s: %d devices, %d allocated%s, %d free\n", d.Class, d.Total, d.Allocated, partly(d.Partial), d.Total-d.Allocated-d.Partial)
		nodes := shown(len(d.PerNode), wide)
		for _, n := range d.PerNode[:nodes] {
			fmt.Fprintf(out, "   %s: %d matching, %d allocated%s %s\n", n.Node, n.Matching, n.Allocated, partly(n.Partial), strings.Join(n.To, ", "))
		}
		more(out, len(d.PerNode), nodes, "nodes with matching devices")
		tainted := shown(len(d.Tainted), wide)
		for _, t := range d.Tainted[:tainted] {
			fmt.Fprintf(out, "   tainted: %s\n", t)
		}
		more(out, len(d.Tainted), tainted, "tainted devices")
		for _, e := range d.CELErrors {
			fmt.Fprintf(out, "   CEL error: %s\n", e)
		}
		if len(d.NoSlices) > 0 {
			n := shown(len(d.NoSlices), wide)
			fmt.Fprintf(out, "   %d nodes the pending pods could use publish no ResourceSlice from %s (its kubelet plugin DaemonSet is missing or not ready there — after an AMI or driver upgrade, check the driver's pods on them): %s",
				len(d.NoSlices), strings.Join(d.Drivers, ", "), strings.Join(d.NoSlices[:n], ", "))
			if n < len(d.NoSlices) {
				fmt.Fprintf(out, ", … %d more (-o wide lists them)", len(d.NoSlices)-n)
			}
			fmt.Fprintln(out)
		}
	}
	switch {
	case r.TopologyDomains != nil:
		printTopology(out, r, wide)
	case len(r.Topology) > 0:
		fmt.Fprintf(out, "7. Topology: the whole group must share one value of %s\n", strings.Join(r.Topology, ", "))
	}
	for _, h := range r.Holders {
		verdict := "equal or higher priority: preemption cannot help"
		if h.Preemptible {
			verdict = "lower priority: preemption could free them"
		}
		fmt.Fprintf(out, "   held by %s (priority %d): %d devices — %s\n", h.Unit, h.Priority, h.Devices, verdict)
	}
	if r.Preemption != "" {
		fmt.Fprintf(out, "8. Preemption: %s\n", r.Preemption)
	}
	if r.MoreNodes != "" {
		fmt.Fprintf(out, "9. More nodes: %s would make it fit\n", r.MoreNodes)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(out, "Note: %s\n", n)
	}
}
