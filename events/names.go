package events

import (
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// DerivedSuffixes lists every suffix a derived name adds to the fleet's name: every owned kind's
// of kinds.Table.
var DerivedSuffixes = derivedSuffixes()

func derivedSuffixes() []string {
	var out []string
	for _, r := range kinds.Owned(true) {
		for _, s := range r.Suffixes {
			if s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Derived is one object the operator creates for a fleet, in the fleet's namespace.
type Derived struct {
	Kind, Name string
}

// String is how a person looks the object up: Kind/name.
func (d Derived) String() string { return d.Kind + "/" + d.Name }

// DerivedObjects lists the objects the operator creates for a fleet under names derived from the
// fleet's, in apply order: every owned kind of kinds.Table under each of its suffixes, and of the
// workload kinds only the fleet's. Each is checked for a foreign owner before anything is written
// to it. The reservation and the claims are named apart (by the bucket, and by the StatefulSet
// controller).
func DerivedObjects(f *v1alpha1.CelldFleet) []Derived {
	workload := kinds.Deployment
	if f.Spec.Profile == v1alpha1.ProfilePersistentFleet || f.Spec.Workload == v1alpha1.WorkloadOrderedStatefulSet {
		workload = kinds.StatefulSet
	}
	out := make([]Derived, 0, 6)
	for _, r := range kinds.Owned(true) {
		if r.Workload && r.Kind != workload {
			continue
		}
		for _, s := range r.Suffixes {
			out = append(out, Derived{string(r.Kind), f.Name + s})
		}
	}
	return out
}

// ControlledBy reports whether obj's controller reference is the fleet with that UID: the one
// test of "ours". A reference to the fleet that is not the controller, or to a fleet of the same
// name and another UID, is someone else's object.
func ControlledBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid && ref.Kind == "CelldFleet" && ref.APIVersion == v1alpha1.SchemeGroupVersion.String()
}

// ClaimName is the claim the StatefulSet controller makes for a fleet's member: the data volume's
// name, the StatefulSet's (the fleet's) and the ordinal.
func ClaimName(fleet string, ordinal int) string {
	return DataVolume + "-" + fleet + "-" + strconv.Itoa(ordinal)
}

// ClaimFleet parses a claim name of the form ClaimName makes: the fleet's name and the ordinal,
// ok false for any other name. A fleet name may itself end in "-<digits>": the ordinal is the
// last segment, so "data-a-1-0" is fleet "a-1", ordinal 0, and never fleet "a".
func ClaimFleet(name string) (fleet string, ordinal int, ok bool) {
	rest, found := strings.CutPrefix(name, DataVolume+"-")
	if !found {
		return "", -1, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", -1, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != rest[i+1:] {
		return "", -1, false
	}
	return rest[:i], n, true
}
