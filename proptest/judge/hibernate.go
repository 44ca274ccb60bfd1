package judge

import (
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
)

// HibernationStops counts the workloads stopped at once for hibernation, each judged against
// the fleet's request; AsleepFleets counts the fleets judged asleep once faults stopped.
const (
	HibernationStops = "workloads stopped at once, judged for a request to hibernate"
	AsleepFleets     = "fleets judged asleep (no member, reservation kept) once faults stopped"
)

// stops judges the operator's deletes of workloads with propagation Background: every member
// stops at once, which clause 1 forbids but for hibernation, a person's explicit stop of the
// whole fleet. So each must carry the workload's UID and come while the fleet, as stored, asks
// to hibernate and is not being deleted.
func (j *Judge) stops() error {
	stops := j.c.WorkloadStops()
	for _, s := range stops[j.stopCursor:] {
		j.judged(C1ShrinkOneAfterRollout)
		j.Extra[HibernationStops]++
		if !s.Preconditioned || !s.FleetExists || !s.Hibernate || s.FleetDeleting {
			return fail(C1ShrinkOneAfterRollout, "%s %s/%s deleted with %d members at %s, all of them at once: the fleet exists %t, asks to hibernate %t, is being deleted %t, UID precondition %t; only hibernation stops every member at once",
				s.Kind, s.Namespace, s.Name, s.Members, s.Time.Format("15:04:05"), s.FleetExists, s.Hibernate, s.FleetDeleting, s.Preconditioned)
		}
	}
	j.stopCursor = len(stops)
	return nil
}

// asleep judges a fleet that asks to hibernate once faults stopped: no workload and no member
// Pod is left, its status says Hibernated, and its reservation still binds its bucket to it. Its
// claims are judged by clause 4 (only a fleet's deletion deletes one).
func (j *Judge) asleep(f *v1alpha1.CelldFleet) error {
	workload := false
	if s := j.c.StatefulSet(f.Namespace, f.Name); owned(s, f.UID) {
		workload = true
	} else if d := j.c.Deployment(f.Namespace, f.Name); owned(d, f.UID) {
		workload = true
	}
	pods := j.members(f)
	if workload || len(pods) > 0 || f.Status.State != v1alpha1.StateHibernated {
		return fail(C10Liveness, "fleet %s asks to hibernate: workload left %t, %d member pods, state %q", f.Name, workload, len(pods), f.Status.State)
	}
	for _, o := range j.c.List(sim.KindReservation, "") {
		if r := o.(*v1alpha1.CelldReservation); r.Spec.FleetUID == f.UID {
			j.Extra[AsleepFleets]++
			return nil
		}
	}
	return fail(C10Liveness, "fleet %s sleeps without the reservation of its bucket %s", f.Name, f.Spec.Bucket.Name)
}
