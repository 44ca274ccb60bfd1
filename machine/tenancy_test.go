package machine_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

// TestRefusalDisclosesNoOtherNamespace: a fleet refused a bucket that a fleet of another namespace
// holds (by reservation) or claims first (no reservation yet) reads, in every condition and Event
// the operator writes for it, that the bucket is reserved elsewhere and that the cluster
// administrator is the one to ask, and nothing of the holder: its namespace, name, UID or
// reservation. Within one namespace the holder is named, as the tenant can read it anyway.
func TestRefusalDisclosesNoOtherNamespace(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	newFleet := func(ns, name string, created time.Time, bound bool) *v1alpha1.CelldFleet {
		f := &v1alpha1.CelldFleet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(created)},
			Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfileBucket, Members: 1, Image: "celld:1",
				Bucket: v1alpha1.BucketSpec{Name: "shared", Region: "eu-west-1"}},
		}
		if bound {
			f.Finalizers = []string{v1alpha1.FleetFinalizer}
		}
		return f
	}
	reservationOf := func(f *v1alpha1.CelldFleet) *v1alpha1.CelldReservation {
		r := render.RenderReservation(f)
		r.CreationTimestamp = f.CreationTimestamp
		return r
	}
	// The holder's names are distinctive so that a substring check cannot pass by accident.
	holder := newFleet("team-alpha", "alpha-store", t0, true)
	neighbour := newFleet("team-beta", "beta-twin", t0, true)
	refused := newFleet("team-beta", "beta-store", t0.Add(time.Hour), false)

	for _, c := range []struct {
		name         string
		obs          events.Observation
		names, hides []string
	}{
		{
			name:  "reserved by another namespace",
			obs:   events.Observation{Reservations: []*v1alpha1.CelldReservation{reservationOf(holder)}},
			hides: []string{"team-alpha", "alpha-store", string(holder.UID), reservationOf(holder).Name},
		},
		{
			name:  "claimed first by another namespace, no reservation yet",
			obs:   events.Observation{Rivals: []*v1alpha1.CelldFleet{holder}},
			hides: []string{"team-alpha", "alpha-store", string(holder.UID)},
		},
		{
			name:  "reserved within the namespace",
			obs:   events.Observation{Reservations: []*v1alpha1.CelldReservation{reservationOf(neighbour)}},
			names: []string{"team-beta/beta-twin", string(neighbour.UID)},
		},
		{
			name:  "claimed first within the namespace",
			obs:   events.Observation{Rivals: []*v1alpha1.CelldFleet{neighbour}},
			names: []string{"team-beta/beta-twin", string(neighbour.UID)},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.obs
			o.Now, o.Fleet, o.NodesSynced = t0.Add(2*time.Hour), refused, true
			v := events.Normalize(refused.Namespace, refused.Name, &o)
			d := machine.Step(&v)

			var said []string
			for _, typ := range []string{v1alpha1.ConditionDegraded, v1alpha1.ConditionReservationBound} {
				cond := conditionOf(d.Status, typ)
				if cond.Reason != machine.ReasonBucketReserved {
					t.Errorf("%s reason %q, want %s", typ, cond.Reason, machine.ReasonBucketReserved)
				}
				said = append(said, typ+": "+cond.Message)
			}
			events := 0
			for _, a := range d.Actions {
				switch a.Kind {
				case machine.RecordEvent:
					events++
					said = append(said, "Event "+a.Reason+": "+a.Message)
				case machine.Apply, machine.BindReservation, machine.AddFinalizer:
					t.Errorf("a refused fleet gets nothing, got %s", a)
				}
			}
			if events == 0 {
				t.Error("the refusal is announced by no Event")
			}
			for _, s := range said {
				if !strings.Contains(s, "bucket shared") {
					t.Errorf("does not name the bucket: %s", s)
				}
				for _, h := range c.hides {
					if strings.Contains(s, h) {
						t.Errorf("discloses %q of another namespace: %s", h, s)
					}
				}
				if len(c.hides) > 0 && (!strings.Contains(s, "another namespace") || !strings.Contains(s, "cluster administrator")) {
					t.Errorf("does not say the bucket is reserved elsewhere and whom to ask: %s", s)
				}
				for _, n := range c.names {
					if !strings.Contains(s, n) {
						t.Errorf("does not name %q of its own namespace: %s", n, s)
					}
				}
			}
		})
	}
}
