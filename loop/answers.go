package loop

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// AnswerTTL bounds how long the answer to a create stands in for a cache that still shows no
// object: a cache that shows none cannot tell a write not yet delivered from an object deleted
// since, so after this the cache is believed again. The watch delivers in well under a second.
var AnswerTTL = 10 * time.Second

// answer is the API server's answer to one of the loop's own writes: the object as it left it.
// A sync that follows the write before the watch delivers it would otherwise decide on the
// version before it, and write the same status again or take its own new workload for none and
// fail the premise that says so. An answer stands in for the cache while the cache still shows
// what the writing sync observed; once it shows anything else (the write itself, or someone
// else's since), the cache is newer and the answer goes.
type answer struct {
	obj kinds.Object
	// on is the resourceVersion the caches showed when the writing sync observed, "" for none.
	on string
	at time.Time
}

// answers are the loop's answers about one fleet: the fleet itself (its status, its
// finalizer) and its workload.
type answers struct {
	fleet, workload *answer
}

// cachedVersions is what the caches showed of the objects the loop keeps answers about.
type cachedVersions struct {
	fleet                   string
	statefulSet, deployment string
}

func versionsOf(obs *events.Observation) cachedVersions {
	var v cachedVersions
	if obs.Fleet != nil {
		v.fleet = obs.Fleet.ResourceVersion
	}
	if obs.StatefulSet != nil {
		v.statefulSet = obs.StatefulSet.ResourceVersion
	}
	if obs.Deployment != nil {
		v.deployment = obs.Deployment.ResourceVersion
	}
	return v
}

// workloadVersion is the resourceVersion cached of the workload of obj's kind.
func (v cachedVersions) workloadVersion(obj kinds.Object) string {
	if _, ok := obj.(*appsv1.Deployment); ok {
		return v.deployment
	}
	return v.statefulSet
}

// The paths of the workload's answer a sync can take, as the loop tells Hooks.Path of them.
const (
	// PathWorkloadAnswered: a sync decided on the answer to its own workload write.
	PathWorkloadAnswered = "loop: a sync decided on its own workload write, not yet in the cache"
	// PathWorkloadCaughtUp: the cache showed another version, and the answer went.
	PathWorkloadCaughtUp = "loop: the cache moved past the workload's answer, which went"
)

// AnswerPaths lists the paths of the loop's answers told to Hooks.Path.
var AnswerPaths = []string{PathWorkloadAnswered, PathWorkloadCaughtUp}

// overlay puts into obs the answers that still stand, drops the others, and returns the path
// the workload's answer took ("" when there was none). Call with l.mu held.
func (a *answers) overlay(obs *events.Observation, cached cachedVersions, now time.Time) (path string) {
	if f := a.fleet; f != nil {
		answered := f.obj.(*v1alpha1.CelldFleet)
		if answered.UID == obs.Fleet.UID && f.on == cached.fleet {
			obs.Fleet = answered
		} else {
			a.fleet = nil
		}
	}
	if w := a.workload; w != nil {
		on := cached.workloadVersion(w.obj)
		switch {
		case on != w.on:
			a.workload = nil
			return PathWorkloadCaughtUp
		case on == "" && now.Sub(w.at) > AnswerTTL:
			a.workload = nil
			return ""
		}
		switch o := w.obj.DeepCopyObject().(type) {
		case *appsv1.StatefulSet:
			obs.StatefulSet = o
		case *appsv1.Deployment:
			obs.Deployment = o
		}
		return PathWorkloadAnswered
	}
	return ""
}

// record keeps the answers of a sync that observed the caches at cached. Call with l.mu held.
func (a *answers) record(observed, fleet *v1alpha1.CelldFleet, applied []kinds.Object, cached cachedVersions, now time.Time) {
	if fleet != nil && fleet != observed && fleet.UID == observed.UID {
		a.fleet = &answer{obj: fleet, on: cached.fleet, at: now}
	}
	for _, obj := range applied {
		if kinds.IsWorkload(obj) {
			a.workload = &answer{obj: obj.DeepCopyObject().(kinds.Object), on: cached.workloadVersion(obj), at: now}
		}
	}
}
