package judge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
)

// What clause 4 counts besides deletions: the two promises of its Guarantees row that are about
// what the operator leaves alone.
const (
	UninstallRequests  = "requests for fleets deleted with their CRD, judged to change nothing but the finalizer"
	ForeignClaimPasses = "passes that saw a claim of no or another fleet under a fleet's disk name, judged held"
	NameTakenPasses    = "passes that saw someone else's object under a fleet's names, judged held"
	BadInputPasses     = "passes that saw a missing input, a refused spec or a bucket another fleet holds, judged held"
)

// S6Held names the promise of SPEC section 6 a hold keeps when the cause is not a claim: what
// only the operator can see is wrong with a fleet's input holds its workload where it is.
const S6Held = "§6 bad input holds the workload"

// Extras lists what the judges count besides the clauses, in the order a run prints them.
var Extras = []string{ForceDeletes, PartitionedTimes, UninstallRequests, ForeignClaimPasses, NameTakenPasses, BadInputPasses, UnfencedPasses, StuckPasses, DiskGoingPasses, CannotComeBackPasses, HeldRolloutWrites, HibernationStops, AsleepFleets}

// The Degraded reasons that hold a fleet's workload where it is (SPEC section 6): the first one
// found is the one the status names, so a foreign claim may be held under another.
var holdReasons = []string{"BucketReserved", "SpecRefused", "StorageClassMissing", "ServiceAccountMissing",
	"PriorityClassMissing", "NameTaken", "ForeignDisks"}

// claimOrdinal is the ordinal of a claim named as a fleet's StatefulSet names its members' data
// claims (data-<fleet>-<ordinal>, the ordinal written as strconv writes it), -1 otherwise.
func claimOrdinal(fleet, name string) int {
	rest, ok := strings.CutPrefix(name, "data-"+fleet+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

// uninstalls: from the moment a fleet is deleted with its CustomResourceDefinition, nothing of it
// changes but its finalizer, in that pass or any later one, whatever fleet the operator thinks
// it serves by then. A request that reaches one of its objects and that the cluster accepted is
// a removal of its finalizer, its status or an Event; any other that changed something breaks
// the promise, and a write of its workload or a delete of one of its Pods or claims breaks it
// even when it changed nothing (it was sent on a view that should have forbidden it). Its
// reservation is left out: a deleted fleet's reservation stays by design, and binding it again
// from a cache that has not seen the deletion yet keeps the bucket as it was.
func (j *Judge) uninstalls() error {
	reqs := j.c.RequestsFrom(j.uninstallCursor)
	j.uninstallCursor += len(reqs)
	gone := j.c.Uninstalled()
	if len(gone) == 0 {
		return nil
	}
	at := make(map[types.UID]int, len(gone))
	for i, g := range gone {
		at[g.UID] = i
	}
	for _, r := range reqs {
		i, ok := at[r.FleetUID]
		if !ok || r.FleetUID == "" || r.Time.Before(gone[i].At) {
			continue
		}
		j.Extra[UninstallRequests]++
		j.judged(C4DiskDeletedOnDelete)
		if r.Err != nil {
			continue
		}
		destructive := r.Verb == "delete" || r.Resource == "statefulsets" || r.Resource == "deployments"
		switch {
		case r.Resource == "celldfleets" && r.Verb == "patch":
			// The finalizer; adding one to a fleet being deleted is refused, so only its removal
			// is ever accepted.
		case r.Resource == "celldfleets/status", r.Resource == "events", r.Resource == "celldreservations", r.Resource == "celldreservations/status":
		case destructive || r.Changed:
			return fail(C4DiskDeletedOnDelete, "fleet uid %s was deleted with its CustomResourceDefinition at %s, and at %s the operator sent %s %s %s/%s (%s, changed %t): an uninstall changes nothing but the finalizer",
				r.FleetUID, gone[i].At.Format("15:04:05"), r.Time.Format("15:04:05"), r.Verb, r.Resource, r.Namespace, r.Name, r.Action, r.Changed)
		}
	}
	return nil
}

// Held judges one pass of the operator on one fleet against what the operator itself observed
// (a cache that has not seen a claim cannot be held to it). A fleet not being deleted is held
// when its observation shows an input the operator cannot fix: for a PersistentFleet, a claim
// under one of its disk names (data-<fleet>-<ordinal>) that carries no celld.io/fleet-uid label
// or another fleet's; for any fleet, an input it names that does not exist. In that pass no request may write
// its workload (a StatefulSet created or resized would adopt the claim, or ask for disks no
// class provisions), and a status it writes must say Degraded with a reason that holds the
// workload (the one the cause names, or one found first) and list every foreign claim among the
// foreign disks. The same holds for a fleet of any profile whose observation says an input it
// names does not exist or the API server refused what was rendered from its spec (inputs:
// "storage class standard missing", "a spec the API server refused (StatefulSet/a)"), or an object
// under a name the fleet would give one of its own that exists and is not the fleet's (taken:
// "Service/a-peers", "CelldReservation/celld-bucket-..."): that object is never written or
// deleted either, by any request of the pass. A foreign claim is never deleted: the disk
// deletions' judge (diskDeletions) refuses every claim not under its own fleet's name and UID.
func (j *Judge) Held(f *v1alpha1.CelldFleet, claims []*corev1.PersistentVolumeClaim, inputs, taken []string, sent []sim.Request) error {
	if f == nil || f.DeletionTimestamp != nil {
		return nil
	}
	var foreign []string
	for _, c := range claims {
		if f.Spec.Profile == v1alpha1.ProfilePersistentFleet && c.Namespace == f.Namespace && c.DeletionTimestamp == nil && claimOrdinal(f.Name, c.Name) >= 0 &&
			types.UID(c.Labels["celld.io/fleet-uid"]) != f.UID {
			foreign = append(foreign, c.Name)
		}
	}
	var causes []string
	if len(foreign) > 0 {
		j.Extra[ForeignClaimPasses]++
		j.judged(C4DiskDeletedOnDelete)
		causes = append(causes, fmt.Sprintf("claims %v of no or another fleet under its disk names", foreign))
	}
	if len(inputs) > 0 {
		j.Extra[BadInputPasses]++
		j.judged(S6Held)
		causes = append(causes, inputs...)
	}
	// The other workload kind under the fleet's name is in the way of nothing the fleet creates:
	// it is never written, but it holds nothing.
	other := "Deployment/" + f.Name
	if f.Spec.Profile != v1alpha1.ProfilePersistentFleet && f.Spec.Workload != v1alpha1.WorkloadOrderedStatefulSet {
		other = "StatefulSet/" + f.Name
	}
	var holding []string
	for _, t := range taken {
		if t != other {
			holding = append(holding, t)
		}
	}
	if len(holding) > 0 {
		j.Extra[NameTakenPasses]++
		j.judged(S6Held)
		causes = append(causes, fmt.Sprintf("%v of someone else under its names", holding))
	}
	for _, r := range sent {
		if r.Namespace == f.Namespace && r.Verb != "create" && slices.Contains(taken, takenName(r)) {
			// A create of a name that exists changes nothing; anything else would take it over.
			return fail(S6Held, "fleet %s saw %v of someone else under its names, and the operator sent %s %s %s (%s) in the same pass: someone else's object is never patched, adopted or deleted",
				f.Name, taken, r.Verb, r.Resource, r.Name, r.Action)
		}
	}
	if len(causes) == 0 {
		return nil
	}
	cause := strings.Join(causes, " and ")
	clause := S6Held
	if len(foreign) > 0 {
		clause = C4DiskDeletedOnDelete
	}
	for _, r := range sent {
		if r.Namespace != f.Namespace {
			continue
		}
		switch r.Resource {
		case "statefulsets", "deployments":
			if r.Name == f.Name {
				return fail(clause, "fleet %s saw %s, and the operator sent %s %s %s (%s) in the same pass: the fleet must be held, its workload not written",
					f.Name, cause, r.Verb, r.Resource, r.Name, r.Action)
			}
		case "celldfleets/status":
			if r.Name != f.Name || r.Err != nil || r.Status == nil {
				continue
			}
			if err := heldStatus(clause, f.Name, cause, r.Status, foreign); err != nil {
				return err
			}
		}
	}
	return nil
}

// takenName names the object a request reached as the operator's observation names an object
// under the fleet's names that is not the fleet's (Kind/name), empty for kinds it never names.
func takenName(r sim.Request) string {
	kind, ok := map[string]string{"services": "Service", "poddisruptionbudgets": "PodDisruptionBudget",
		"networkpolicies": "NetworkPolicy", "statefulsets": "StatefulSet", "deployments": "Deployment",
		"celldreservations": "CelldReservation"}[r.Resource]
	if !ok {
		return ""
	}
	return kind + "/" + r.Name
}

func heldStatus(clause, fleet, cause string, st *v1alpha1.CelldFleetStatus, foreign []string) error {
	var degraded *string
	reason := ""
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == v1alpha1.ConditionDegraded {
			s := string(c.Status)
			degraded, reason = &s, c.Reason
		}
	}
	if degraded == nil || *degraded != "True" || !slices.Contains(holdReasons, reason) {
		return fail(clause, "fleet %s saw %s and wrote a status that does not hold it: Degraded %s, reason %q",
			fleet, cause, orNone(degraded), reason)
	}
	var listed []string
	if st.Disks != nil {
		listed = st.Disks.Foreign
	}
	for _, name := range foreign {
		if !slices.Contains(listed, name) {
			return fail(C4DiskDeletedOnDelete, "fleet %s saw claim %s of no or another fleet under its disk name; its status lists foreign disks %v", fleet, name, listed)
		}
	}
	return nil
}

func orNone(s *string) string {
	if s == nil {
		return "absent"
	}
	return fmt.Sprint(*s)
}
