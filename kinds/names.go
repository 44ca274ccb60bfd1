package kinds

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Labels and annotations the operator puts on what it creates.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	LabelFleetUID  = "celld.io/fleet-uid"
	// AnnotationSettled records on the workload the size whose rollout last completed with every
	// member ready. A workload without it never finished provisioning; a size above or below it
	// is a growth or a scale-in still in flight. It makes the lifecycle state derivable from
	// observation alone.
	AnnotationSettled = "celld.io/settled-members"
	// AnnotationHibernated records on the fleet's PodDisruptionBudget that the operator stopped
	// the members for spec.hibernate, from the step that starts the stop until the step that sees
	// every member ready again after the wake. The budget is kept while the fleet sleeps (the
	// workload is not), so hibernation stays derivable from observation alone.
	AnnotationHibernated = "celld.io/hibernated"
	// HibernatedStopping and HibernatedStopped are its values: the stop was asked for, and the
	// operator saw it done.
	HibernatedStopping = "stopping"
	HibernatedStopped  = "stopped"
	// AppName is the app.kubernetes.io/name of everything the operator creates.
	AppName = "celld"
	// ManagedBy is the app.kubernetes.io/managed-by of everything the operator creates.
	ManagedBy = "celld-operator"
	// DataVolume is the name of a member's data volume (claim template or emptyDir).
	DataVolume = "data"
)

// DerivedSuffixes lists every suffix a derived name adds to the fleet's name: every owned kind's
// of Table.
var DerivedSuffixes = derivedSuffixes()

func derivedSuffixes() []string {
	var out []string
	for _, r := range Owned(true) {
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
// fleet's, in apply order: every owned kind of Table under each of its suffixes, and of the
// workload kinds only the fleet's. Each is checked for a foreign owner before anything is written
// to it. The reservation and the claims are named apart (by the bucket, and by the StatefulSet
// controller).
func DerivedObjects(f *v1alpha1.CelldFleet) []Derived {
	workload := Deployment
	if f.Spec.Profile == v1alpha1.ProfilePersistentFleet || f.Spec.Workload == v1alpha1.WorkloadOrderedStatefulSet {
		workload = StatefulSet
	}
	out := make([]Derived, 0, 6)
	for _, r := range Owned(true) {
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

// FieldManager is the one field manager of everything the operator writes.
const FieldManager = "celld-operator"

// MadeByOperator reports whether the operator made a reservation: only those are trusted to
// reserve a bucket. deploy/rbac/reservation_policy.yaml lets no one but the operator's
// ServiceAccount create or change a reservation, so one the operator did not make was made
// before that policy, or by an administrator by hand: it binds nothing, and one under the name
// a fleet would create holds that fleet (NameTaken) until a person deletes it.
//
// The operator's reservations carry its managed-by label, and the API server recorded the
// operator's field manager as the writer of their spec when it created them.
func MadeByOperator(r *v1alpha1.CelldReservation) bool {
	if r.Labels[LabelManagedBy] != ManagedBy {
		return false
	}
	for _, m := range r.ManagedFields {
		if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == "" &&
			m.FieldsV1 != nil && bytes.Contains(m.FieldsV1.Raw, []byte(`"f:spec"`)) {
			return true
		}
	}
	return false
}
