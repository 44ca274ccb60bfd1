package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// age is kubectl's: 45s, 5m2s, 3h, 2d.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printStatus(w io.Writer, r *report, now time.Time, history int) {
	f := r.fleet
	st := &f.Status
	kind := string(f.Spec.Profile)
	if f.Spec.Workload != "" {
		kind += ", " + string(f.Spec.Workload)
	}
	fmt.Fprintf(w, "Fleet:        %s/%s (%s)\n", f.Namespace, f.Name, kind)
	fmt.Fprintf(w, "Image:        %s\n", f.Spec.Image)
	fmt.Fprintf(w, "State:        %s", orDash(string(st.State)))
	if st.ObservedGeneration != f.Generation {
		// The operator has not decided on the latest spec yet: what follows may be about the
		// previous one.
		fmt.Fprintf(w, " (decided on generation %d of %d)", st.ObservedGeneration, f.Generation)
	}
	if f.DeletionTimestamp != nil {
		fmt.Fprintf(w, ", deletion requested %s ago", age(f.DeletionTimestamp.Time, now))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Members:      spec %d, desired %d, current %d, ready %d, updated %d", f.Spec.Members,
		st.Members.Desired, st.Members.Current, st.Members.Ready, st.Members.Updated)
	if st.RecommendedMembers != nil {
		fmt.Fprintf(w, ", recommended %d", *st.RecommendedMembers)
	}
	fmt.Fprintln(w)
	if line := rolloutLine(f); line != "" {
		fmt.Fprintf(w, "Rollout:      %s\n", line)
	}
	if line := hibernationLine(f); line != "" {
		fmt.Fprintf(w, "Hibernation:  %s\n", line)
	}
	fmt.Fprintf(w, "Blocked by:   %s\n", orDash(st.BlockedBy))
	fmt.Fprintf(w, "Next action:  %s\n", orDash(st.NextAction))

	fmt.Fprintln(w, "\nConditions:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime.Time, now), c.Message)
	}
	if len(st.Conditions) == 0 {
		fmt.Fprintln(tw, "  (none: the operator has not written this fleet's status yet)")
	}
	tw.Flush()

	fmt.Fprintln(w, "\nMembers:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  POD\tNODE\tZONE\tREADY\tREVISION\tDISK\tSIZE\tAGE")
	for i := range r.pods {
		p := &r.pods[i]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, orDash(p.Spec.NodeName), r.zone(p), ready(p), revision(p), r.disk(p), r.diskSize(p), age(p.CreationTimestamp.Time, now))
	}
	if len(r.pods) == 0 {
		fmt.Fprintln(tw, "  (no member Pods)")
	}
	tw.Flush()
	if d := st.Disks; d != nil {
		if len(d.Unused) > 0 {
			fmt.Fprintf(w, "  disks kept, used by no member: %s\n", strings.Join(d.Unused, ", "))
		}
		if len(d.Foreign) > 0 {
			fmt.Fprintf(w, "  disks under this fleet's name with another fleet's UID (never used): %s\n", strings.Join(d.Foreign, ", "))
		}
		printDisks(w, d)
	}

	fmt.Fprintln(w)
	if res := r.reservation; res != nil {
		fmt.Fprintf(w, "Reservation:  %s (bucket %s", res.Name, res.Spec.Bucket.Name)
		if res.Spec.Bucket.Endpoint != "" {
			fmt.Fprintf(w, " at %s", res.Spec.Bucket.Endpoint)
		}
		fmt.Fprintf(w, ", region %s), bound to this fleet's UID %s\n", orDash(res.Spec.Bucket.Region), res.Spec.FleetUID)
	} else {
		fmt.Fprintf(w, "Reservation:  none bound to this fleet (bucket %s): see the ReservationBound condition\n", f.Spec.Bucket.Name)
	}
	if history != 0 {
		printHistory(w, r, now, history)
	}
}

// printHistory prints the latest n capacity decisions (all when n < 0), oldest first.
func printHistory(w io.Writer, r *report, now time.Time, n int) {
	if r.reservation == nil {
		fmt.Fprintf(w, "Capacity history: none (no reservation is bound to %s/%s)\n", r.fleet.Namespace, r.fleet.Name)
		return
	}
	h := r.reservation.Status.CapacityHistory
	shown := h
	if n >= 0 && len(h) > n {
		shown = h[len(h)-n:]
	}
	fmt.Fprintf(w, "Capacity history (%d of %d, oldest first):\n", len(shown), len(h))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TIME\tAGO\tDECISION\tFROM\tTO\tSOURCE")
	for _, d := range shown {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\n", d.Time.UTC().Format(time.RFC3339), age(d.Time.Time, now), d.Kind, d.From, d.To, d.Source)
	}
	if len(h) == 0 {
		fmt.Fprintln(tw, "  (empty: no capacity decision recorded)")
	}
	tw.Flush()
}

func ready(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		// A drain's eviction says so on the Pod: the person running it sees which member it took.
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == events.DisruptionEviction {
				return "evicted"
			}
		}
		return "terminating"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "unschedulable"
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return "true"
			}
			return "false"
		}
	}
	return "false"
}

// revision is the workload's revision the Pod runs: a StatefulSet's controller-revision-hash, a
// Deployment's pod-template-hash.
func revision(p *corev1.Pod) string {
	if r := p.Labels["controller-revision-hash"]; r != "" {
		return r
	}
	return orDash(p.Labels["pod-template-hash"])
}

func (r *report) zone(p *corev1.Pod) string {
	if p.Spec.NodeName == "" {
		return "-"
	}
	if r.nodesHidden {
		return "?"
	}
	n := r.nodes[p.Spec.NodeName]
	if n == nil {
		return "(node gone)"
	}
	if n.Spec.Unschedulable {
		return orDash(n.Labels[corev1.LabelTopologyZone]) + " (cordoned)"
	}
	return orDash(n.Labels[corev1.LabelTopologyZone])
}

// diskSize is the size of the member's disk as its claim says: the capacity its volume has, and
// "-> requested" while a resize asks for more.
func (r *report) diskSize(p *corev1.Pod) string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		req, capa := claimSizes(r.claims[v.PersistentVolumeClaim.ClaimName])
		switch {
		case req == "" && capa == "":
			out = append(out, "-")
		case capa == "" || capa == req:
			out = append(out, orDash(req))
		default:
			out = append(out, capa+"->"+req)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// claimSizes are a claim's storage request and capacity, empty when unknown.
func claimSizes(c *corev1.PersistentVolumeClaim) (requested, capacity string) {
	if c == nil {
		return "", ""
	}
	if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		requested = q.String()
	}
	if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
		capacity = q.String()
	}
	return requested, capacity
}

func (r *report) disk(p *corev1.Pod) string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		name := v.PersistentVolumeClaim.ClaimName
		c := r.claims[name]
		switch {
		case c == nil:
			out = append(out, name+" (missing)")
		case c.DeletionTimestamp != nil:
			out = append(out, name+" (being deleted)")
		case c.Status.Phase != corev1.ClaimBound:
			out = append(out, fmt.Sprintf("%s (%s)", name, c.Status.Phase))
		default:
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// printDisks prints each of the fleet's claims with the size it asks for and the size it has,
// and what holds a resize on its way.
func printDisks(w io.Writer, d *v1alpha1.DiskAudit) {
	if d.Size == "" || len(d.Claims) == 0 {
		return
	}
	fmt.Fprintf(w, "\nDisks:        spec.storage.size %s\n", d.Size)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLAIM\tMEMBER\tREQUESTED\tCAPACITY\tRESIZE\tMESSAGE")
	for _, c := range d.Claims {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.Claim, orDash(c.Member), orDash(c.Requested), orDash(c.Capacity), orDash(c.Resize), orDash(c.Message))
	}
	tw.Flush()
	if len(d.Larger) > 0 {
		fmt.Fprintf(w, "  larger than spec.storage.size, kept as they are: %s\n", strings.Join(d.Larger, ", "))
	}
}

// rolloutLine says where a staged rollout stands, empty for a fleet that stages none and has
// none in flight.
func rolloutLine(f *v1alpha1.CelldFleet) string {
	r := f.Status.Rollout
	canary := ""
	if f.Spec.Rollout != nil {
		canary = fmt.Sprintf(" (canary %d)", f.Spec.Rollout.Canary)
	}
	switch {
	case r == nil && f.Spec.Rollout == nil:
		return ""
	case r == nil:
		return "staged" + canary + ", none in flight: every member runs the current template"
	case r.Held:
		return fmt.Sprintf("HELD: revision %s on %d of %d members%s, the rest on %s; approve with kubectl celld rollout approve %s, or revert the spec",
			r.Revision, r.Updated, r.Total, canary, orDash(r.CurrentRevision), f.Name)
	}
	return fmt.Sprintf("revision %s on %d of %d members%s, rolling one member at a time (partition %d)", r.Revision, r.Updated, r.Total, canary, r.Partition)
}

// hibernationLine says where a fleet stands with hibernation, empty for a fleet that neither
// sleeps nor is on its way to or from sleep.
func hibernationLine(f *v1alpha1.CelldFleet) string {
	switch st := f.Status.State; {
	case st == v1alpha1.StateHibernated:
		return fmt.Sprintf("ASLEEP: no member runs; disks, reservation, bucket and size (%d members) kept; wake with kubectl celld wake %s", f.Spec.Members, f.Name)
	case st == v1alpha1.StateHibernating:
		return "stopping every member at once (spec.hibernate); disks, reservation and bucket are kept"
	case st == v1alpha1.StateWaking:
		return fmt.Sprintf("waking at %d members on the disks kept; Ready once every member is", f.Status.Members.Desired)
	case f.Spec.Hibernate:
		return "asked for (spec.hibernate): the operator has not acted on it yet"
	}
	return ""
}
