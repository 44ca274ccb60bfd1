package kube

import (
	"time"

	"github.com/celld/celld-operator/events"
)

// Observe gathers what the caches hold about one fleet, by the events.Gather the property tests
// run on the simulator's store. The objects are the caches' own: nothing downstream may modify
// them.
func (i *Informers) Observe(key events.FleetKey, now time.Time, util *events.Utilization) (*events.Observation, error) {
	return events.Gather(i, key, now, util)
}
