package events

import "strings"

// FleetKey names one fleet: what the operator's queue holds and what the loop, the status
// writer, the metrics and the hooks keep their memory of a fleet under. A struct rather than a
// "namespace/name" string, so that no caller joins, splits or swaps the parts on its own, and a
// key that names no fleet cannot be built from an object.
type FleetKey struct {
	Namespace, Name string
}

// KeyOf is the key of the fleet f.
func KeyOf(f interface {
	GetNamespace() string
	GetName() string
}) FleetKey {
	return FleetKey{Namespace: f.GetNamespace(), Name: f.GetName()}
}

// String is the key as kubectl names the fleet: namespace/name.
func (k FleetKey) String() string { return k.Namespace + "/" + k.Name }

// Valid reports whether k can name a fleet: both parts set, and the name without a slash.
func (k FleetKey) Valid() bool {
	if k.Namespace == "" || k.Name == "" {
		return false
	}
	return !strings.Contains(k.Name, "/")
}
