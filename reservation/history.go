package reservation

import (
	"github.com/celld/celld-operator/api/v1alpha1"
)

// MaxHistory bounds the capacity history kept in a reservation.
const MaxHistory = 32

// SameDecision reports whether two entries record the same decision: a repeat of an append whose
// effect the caches did not show yet. Times differ between repeats, so they are not compared.
func SameDecision(a, b v1alpha1.CapacityDecision) bool {
	return a.Kind == b.Kind && a.From == b.From && a.To == b.To && a.Source == b.Source
}

// Append adds d to the history unless it repeats the newest entry, then trims the history to
// MaxHistory entries. Trimming never drops the anchor of a standing scale-in request: it drops the
// ShrinkOne steps taken under it instead, so trimming is never less conservative than keeping all.
func Append(history []v1alpha1.CapacityDecision, d v1alpha1.CapacityDecision) []v1alpha1.CapacityDecision {
	if n := len(history); n > 0 && SameDecision(history[n-1], d) {
		return history
	}
	out := make([]v1alpha1.CapacityDecision, 0, len(history)+1)
	out = append(out, history...)
	out = append(out, d)
	for len(out) > MaxHistory {
		out = dropOne(out)
	}
	return out
}

// AppendAll appends ds, oldest first, as one write carries them: a history that already ends
// with every one of them (the same write repeated, its answer not in the caches yet) is returned
// as it is; otherwise each is appended as Append does.
func AppendAll(history []v1alpha1.CapacityDecision, ds []v1alpha1.CapacityDecision) []v1alpha1.CapacityDecision {
	if k, n := len(ds), len(history); k > 0 && n >= k {
		repeat := true
		for i := range ds {
			if !SameDecision(history[n-k+i], ds[i]) {
				repeat = false
				break
			}
		}
		if repeat {
			return history
		}
	}
	for _, d := range ds {
		history = Append(history, d)
	}
	return history
}

// dropOne removes the oldest entry, unless that entry anchors the standing scale-in request, in
// which case the oldest ShrinkOne after it goes.
func dropOne(h []v1alpha1.CapacityDecision) []v1alpha1.CapacityDecision {
	anchor := -1
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == v1alpha1.DecisionShrinkOne {
			continue
		}
		if h[i].Kind == v1alpha1.DecisionScaleInRequested {
			anchor = i
		}
		break
	}
	if anchor != 0 {
		return h[1:]
	}
	return append(h[:1], h[2:]...)
}
