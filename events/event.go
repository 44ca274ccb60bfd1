package events

import (
	"fmt"
	"time"

	"github.com/celld/celld-operator/kinds"
)

// Kind names what an event says happened. The object's own kind is in the object (kinds.Of).
type Kind string

// The normalized events: the store needs to tell no more apart.
const (
	// Observed: the object exists as Object shows (a fleet being deleted included).
	Observed Kind = "Observed"
	// Gone: the object was deleted; Object is its last known state.
	Gone Kind = "Gone"
	// UtilizationObserved: Utilization was sampled for Fleet.
	UtilizationObserved Kind = "UtilizationObserved"
	// TimePassed only moves time on.
	TimePassed Kind = "TimePassed"
)

// Event is one normalized observation. Object is the typed Kubernetes object (its last known
// state for a Gone event); Time is when it was observed and is the machine's only clock.
type Event struct {
	Kind        Kind
	Time        time.Time
	Object      any
	Utilization *Utilization
	// Fleet is the fleet a Utilization event is about.
	Fleet FleetKey
}

// Observe turns an object seen by an informer (or the simulator) into its event. gone is true
// when the object was deleted.
func Observe(obj any, gone bool, now time.Time) (Event, error) {
	if kinds.Of(obj) == "" {
		return Event{}, fmt.Errorf("observe: no event for object of type %T", obj)
	}
	ev := Event{Kind: Observed, Time: now, Object: obj}
	if gone {
		ev.Kind = Gone
	}
	return ev, nil
}

// Passed is the event that only moves time on.
func Passed(now time.Time) Event { return Event{Kind: TimePassed, Time: now} }
