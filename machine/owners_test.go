package machine_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

func newFleet(profile v1alpha1.Profile) *v1alpha1.CelldFleet {
	f := &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a", Generation: 1, Finalizers: []string{v1alpha1.FleetFinalizer}},
		Spec:       v1alpha1.CelldFleetSpec{Profile: profile, Members: 3, Image: "registry.example/celld:1", Bucket: v1alpha1.BucketSpec{Name: "bkt", Region: "r"}},
	}
	if profile == v1alpha1.ProfilePersistentFleet {
		f.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "fast", Size: resource.MustParse("1Gi")}
	}
	return f
}

// written lists the Kind/name of every object an Apply writes, and the kinds of the other
// mutating actions.
func written(d machine.Decision) []string {
	var out []string
	for _, a := range d.Actions {
		switch a.Kind {
		case machine.Apply:
			kind, _, _ := strings.Cut(strings.TrimPrefix(a.Key, "apply/"), "/")
			out = append(out, kind+"/"+a.Name)
		case machine.PublishStatus, machine.RecordEvent, machine.Requeue:
		default:
			out = append(out, string(a.Kind))
		}
	}
	return out
}

// Every object the fleet would create that exists and is not the fleet's holds the fleet with
// Degraded=NameTaken naming it, and is never written to; no workload is created beside it.
func TestSomeoneElsesObjectIsNeverWritten(t *testing.T) {
	f := newFleet(v1alpha1.ProfilePersistentFleet)
	for _, taken := range []string{"Service/a", "Service/a-peers", "NetworkPolicy/a-clients", "NetworkPolicy/a-peers",
		"PodDisruptionBudget/a", "StatefulSet/a", "CelldReservation/" + render.ReservationName(f.Spec.Bucket)} {
		t.Run(taken, func(t *testing.T) {
			v := events.Normalize("ns", "a", &events.Observation{Fleet: f, Unowned: []string{taken, "Deployment/a"}})
			d := machine.New().Step(&v)
			w := written(d)
			if slices.Contains(w, taken) || slices.Contains(w, "StatefulSet/a") {
				t.Errorf("writes %v: want neither %s nor the workload", w, taken)
			}
			if strings.HasPrefix(taken, "CelldReservation/") == slices.Contains(w, string(machine.BindReservation)) {
				t.Errorf("writes %v: the reservation is bound exactly when its name is free", w)
			}
			c := conditionOf(d.Status, v1alpha1.ConditionDegraded)
			if c.Status != metav1.ConditionTrue || c.Reason != machine.ReasonNameTaken || !strings.Contains(c.Message, taken) ||
				strings.Contains(c.Message, "Deployment/a") {
				t.Errorf("Degraded %s %s %q: want NameTaken naming %s only (the fleet runs no Deployment)", c.Status, c.Reason, c.Message, taken)
			}
		})
	}

	// One name taken is said in the singular, two in the plural, both named.
	for _, tc := range []struct {
		taken []string
		says  string
	}{
		{[]string{"Service/a"}, "Service/a exists and does not belong to this fleet"},
		{[]string{"Service/a", "Service/a-peers"}, "Service/a, Service/a-peers exist and do not belong to this fleet"},
	} {
		v := events.Normalize("ns", "a", &events.Observation{Fleet: f, Unowned: tc.taken})
		if c := conditionOf(machine.New().Step(&v).Status, v1alpha1.ConditionDegraded); !strings.Contains(c.Message, tc.says) {
			t.Errorf("%v taken: Degraded %q, want %q", tc.taken, c.Message, tc.says)
		}
	}

	// A running fleet whose Service was replaced by someone else's: the Service is left alone,
	// the workload is held where it is, nothing is deleted.
	run := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	v := copyView(run)
	v.Owned.Objects = slices.DeleteFunc(slices.Clone(v.Owned.Objects), func(o events.OwnedObject) bool {
		return o.Kind == "Service" && o.Name == "a-peers"
	})
	v.Unowned = []string{"Service/a-peers"}
	v.Fleet.Spec.Members = 5
	d := machine.New().Step(&v)
	if w := written(d); len(w) != 0 {
		t.Errorf("a running fleet with a taken name writes %v; want nothing", w)
	}
	if c := conditionOf(d.Status, v1alpha1.ConditionDegraded); c.Reason != machine.ReasonNameTaken || !strings.Contains(c.Message, "Service/a-peers") {
		t.Errorf("Degraded %s %q: want NameTaken naming Service/a-peers", c.Reason, c.Message)
	}
}

func deletingView(profile v1alpha1.Profile, uninstalling bool, claims ...*corev1.PersistentVolumeClaim) events.View {
	f := newFleet(profile)
	now := metav1.Now()
	f.DeletionTimestamp = &now
	return events.Normalize("ns", "a", &events.Observation{Fleet: f, PVCs: claims, Uninstalling: uninstalling})
}

func claim(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		ResourceVersion: "rv-" + name, Labels: labels}}
}

// A deleted PersistentFleet deletes only the claims its StatefulSet made: by their exact name
// and the fleet's UID label, with the UID and resourceVersion seen as preconditions.
func TestDisksDeletedOnlyByExactNameAndFleetUID(t *testing.T) {
	own := map[string]string{kinds.LabelInstance: "a", kinds.LabelFleetUID: "uid-a"}
	other := map[string]string{kinds.LabelInstance: "a", kinds.LabelFleetUID: "uid-other"}
	v := deletingView(v1alpha1.ProfilePersistentFleet, false,
		claim("data-a-0", own), claim("data-a-1", nil), claim("data-a-2", other), claim("data-a-03", own), claim("scratch-a", own))
	d := machine.New().Step(&v)
	var deleted []string
	for _, a := range d.Actions {
		if a.Kind != machine.DeleteDisk {
			continue
		}
		deleted = append(deleted, a.Name)
		if a.UID != types.UID("uid-"+a.Name) || a.ResourceVersion != "rv-"+a.Name {
			t.Errorf("delete %s with uid %q rv %q: want both preconditions", a.Name, a.UID, a.ResourceVersion)
		}
	}
	if !slices.Equal(deleted, []string{"data-a-0"}) {
		t.Errorf("deleted %v, want data-a-0 alone", deleted)
	}
	if slices.Contains(written(d), string(machine.RemoveFinalizer)) {
		t.Errorf("finalizer removed while the fleet's disk is there")
	}
	// Once its own disk is gone, the fleet goes; the claims that are not its own stay.
	v = deletingView(v1alpha1.ProfilePersistentFleet, false, claim("data-a-1", nil), claim("data-a-2", other), claim("data-a-03", own))
	if w := written(machine.New().Step(&v)); !slices.Equal(w, []string{string(machine.RemoveFinalizer)}) {
		t.Errorf("writes %v, want the finalizer removed alone", w)
	}
}

// A fleet deleted with its CustomResourceDefinition (an uninstall) deletes no disk, stops no
// member: it lets the fleet go at once and records what it kept.
func TestUninstallKeepsEveryDisk(t *testing.T) {
	own := map[string]string{kinds.LabelInstance: "a", kinds.LabelFleetUID: "uid-a"}
	v := deletingView(v1alpha1.ProfilePersistentFleet, true, claim("data-a-0", own), claim("data-a-1", own))
	v.Members = []events.Member{{Name: "a-0", Ordinal: 0, Ready: true}}
	d := machine.New().Step(&v)
	if w := written(d); !slices.Equal(w, []string{string(machine.RemoveFinalizer)}) {
		t.Errorf("writes %v, want the finalizer removed alone", w)
	}
	var said string
	for _, a := range d.Actions {
		if a.Kind == machine.RecordEvent && a.Reason == "DisksKept" {
			said = a.Message
		}
	}
	if !strings.Contains(said, "data-a-0, data-a-1") {
		t.Errorf("event %q: want it to name the kept disks", said)
	}
	// With no disk to keep, the event says only that none is deleted.
	bare := deletingView(v1alpha1.ProfilePersistentFleet, true)
	for _, a := range machine.New().Step(&bare).Actions {
		if a.Kind == machine.RecordEvent && a.Reason == "DisksKept" && strings.Contains(a.Message, "kept:") {
			t.Errorf("no disks, event %q: want no list of kept disks", a.Message)
		}
	}
	// Uninstalling is only ever about a fleet being deleted.
	live := events.Normalize("ns", "a", &events.Observation{Fleet: newFleet(v1alpha1.ProfilePersistentFleet), Uninstalling: true})
	if live.Uninstalling {
		t.Errorf("a fleet not being deleted reads as uninstalling")
	}
}

// The names a fleet renders are the names DerivedObjects lists, which the operator checks for
// a foreign owner.
func TestDerivedObjectsAreWhatIsRendered(t *testing.T) {
	for _, f := range []*v1alpha1.CelldFleet{newFleet(v1alpha1.ProfilePersistentFleet), newFleet(v1alpha1.ProfileBucket)} {
		var rendered []string
		for _, o := range render.Render(f, 3, 3).All() {
			m := o.(metav1.Object)
			kind := fmt.Sprintf("%T", o)
			kind = kind[strings.LastIndex(kind, ".")+1:]
			rendered = append(rendered, kind+"/"+m.GetName())
		}
		var derived []string
		for _, d := range kinds.DerivedObjects(f) {
			derived = append(derived, d.String())
		}
		if !slices.Equal(rendered, derived) {
			t.Errorf("%s: rendered %v, derived %v", f.Spec.Profile, rendered, derived)
		}
	}
}

// admissible mirrors the CelldFleet name rule of the CRD (api/v1alpha1): no derived suffix.
func admissible(name string) bool {
	for _, s := range kinds.DerivedSuffixes {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

// Two fleets of one namespace never render an object of the same kind and name, and no two
// fleets' claims share a name: random names built from the suffixes' own pieces, to hit the
// near misses.
func TestDerivedNamesNeverCollide(t *testing.T) {
	piece := rapid.SampledFrom([]string{"a", "x", "peers", "clients", "0", "1", "data", "-"})
	name := rapid.Custom(func(t *rapid.T) string {
		s := strings.Join(rapid.SliceOfN(piece, 1, 6).Draw(t, "pieces"), "")
		return strings.Trim(strings.ReplaceAll(s, "--", "-"), "-")
	})
	rapid.Check(t, func(t *rapid.T) {
		a, b := name.Draw(t, "a"), name.Draw(t, "b")
		if a == "" || b == "" || a == b {
			t.Skip("not two fleets")
		}
		fa, fb := newFleet(v1alpha1.ProfilePersistentFleet), newFleet(v1alpha1.ProfileBucket)
		fa.Name, fb.Name = a, b
		collide := false
		for _, x := range kinds.DerivedObjects(fa) {
			for _, y := range append(kinds.DerivedObjects(fb), kinds.Derived{Kind: "StatefulSet", Name: b}) {
				collide = collide || x == y
			}
		}
		for i := range 12 {
			for j := range 12 {
				collide = collide || kinds.ClaimName(a, i) == kinds.ClaimName(b, j)
			}
		}
		if collide && admissible(a) && admissible(b) {
			t.Fatalf("fleets %q and %q are both admissible and their derived names collide", a, b)
		}
		// The rule is no stricter than it must be: every refused name collides with a fleet.
		if !admissible(a) && !collide {
			for _, s := range kinds.DerivedSuffixes {
				if base, ok := strings.CutSuffix(a, s); ok && base != "" {
					fb.Name = base
					if !slices.ContainsFunc(kinds.DerivedObjects(fb), func(d kinds.Derived) bool {
						return slices.Contains(kinds.DerivedObjects(fa), d)
					}) && s == kinds.SuffixPeers {
						t.Fatalf("fleet %q is refused, yet collides with no fleet %q", a, base)
					}
				}
			}
		}
	})
}
