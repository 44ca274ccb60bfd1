package render

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Matches reports whether an observed object already holds every field the desired object sets:
// the test server-side apply would pass without changing anything. Fields the API server or other
// controllers add (defaults, status, other managers' fields) do not count, so a converged fleet
// costs no write, while a hand edit of a field the operator sets is drift and is repaired.
func Matches(desired, observed any) bool {
	if observed == nil {
		return false
	}
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false
	}
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(observed)
	if err != nil {
		return false
	}
	// Informer caches hand objects out without apiVersion and kind; the type already says both.
	delete(d, "status")
	delete(d, "apiVersion")
	delete(d, "kind")
	return subset(d, o)
}

func subset(d, o any) bool {
	switch dv := d.(type) {
	case map[string]any:
		ov, ok := o.(map[string]any)
		if !ok {
			return len(dv) == 0 && o == nil
		}
		for k, x := range dv {
			if x == nil {
				// An unset timestamp (creationTimestamp: null) sets nothing.
				continue
			}
			if !subset(x, ov[k]) {
				return false
			}
		}
		return true
	case []any:
		ov, ok := o.([]any)
		if !ok || len(ov) != len(dv) {
			return len(dv) == 0 && o == nil
		}
		for i := range dv {
			if !subset(dv[i], ov[i]) {
				return false
			}
		}
		return true
	default:
		return d == o
	}
}
