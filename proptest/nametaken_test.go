package proptest

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/proptest/harness"
	"github.com/celld/celld-operator/render"
)

// Someone else's object under a name the fleet gives one of its own (each of its derived
// objects, on every profile) holds the fleet with Degraded=NameTaken naming it: a new fleet gets
// no workload, one still provisioning keeps its workload as it is, a running one keeps it as it
// is through a scale-up and loses no member or disk, and the object is never patched, adopted or deleted. Every pass is judged by the hold
// judge, which refuses any request to the object and a status that does not hold the fleet.
// Once its owner deletes it, the fleet converges to its spec.
func TestNameTakenHoldsTheFleet(t *testing.T) {
	for _, base := range profiles {
		probe := harness.NewFleet(fleetSpec(base, "alpha", 3))
		probe.UID = "uid-probe"
		for _, o := range render.Render(probe, 3, -1).All() {
			kind := kinds.Of(o)
			isWorkload := kind == sim.KindStatefulSet || kind == sim.KindDeployment
			for _, when := range []string{"new", "provisioning", "running"} {
				if when != "new" && isWorkload {
					continue // a created fleet's workload holds its own name
				}
				running := when == "running"
				t.Run(fmt.Sprintf("%s-%s/%s-%s/%s", base.Profile, base.Workload, kind, o.GetName(), when), func(t *testing.T) {
					w := harness.NewWorld(8, 1)
					if when != "new" {
						must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
						if running {
							must(t, w.Converge())
						} else {
							// Created, its members not all ready yet.
							must(t, w.Step(1))
						}
						// The fleet's own object goes (as a person's mistaken delete would), and
						// someone else's takes its name before the operator makes it again.
						must(t, w.C.Delete(kind, harness.Namespace, o.GetName()))
					}
					kept := claimsOf(w)
					pods := podUIDs(w)
					foreign := someoneElses(o)
					must(t, w.C.Create(foreign))
					workload := workloadOf(w)
					before := written(w.C.Get(kind, harness.Namespace, o.GetName()).(kinds.Object))
					switch when {
					case "new":
						must(t, w.CreateFleet(fleetSpec(base, "alpha", 3)))
					case "running":
						must(t, w.Scale("alpha", 5))
					}
					must(t, w.Step(30))

					got := w.C.Fleet(harness.Namespace, "alpha")
					if c := degraded(got); c == nil || c.Reason != "NameTaken" {
						t.Errorf("Degraded %+v: want NameTaken", c)
					} else if want := string(kind) + "/" + o.GetName(); !strings.Contains(c.Message, want) {
						t.Errorf("Degraded message %q does not name %s", c.Message, want)
					}
					if now := written(w.C.Get(kind, harness.Namespace, o.GetName()).(kinds.Object)); now != before {
						t.Errorf("someone else's %s %s was written: %s, then %s", kind, o.GetName(), before, now)
					}
					if after := workloadOf(w); after != workload {
						t.Errorf("the workload while held: %s, want %s", after, workload)
					}
					now := claimsOf(w)
					for c, uid := range kept {
						if now[c] != uid {
							t.Errorf("claim %s was deleted while the fleet was held: claims %v", c, now)
						}
					}
					if when != "provisioning" && len(now) != len(kept) {
						t.Errorf("claims %v while held; want %v", now, kept)
					}
					if now := podUIDs(w); when != "provisioning" && fmt.Sprint(now) != fmt.Sprint(pods) {
						t.Errorf("member Pods %v while held; want %v", now, pods)
					}

					must(t, w.C.Delete(kind, harness.Namespace, o.GetName()))
					must(t, w.Converge())
					want := int32(3)
					if running {
						want = 5
					}
					wantSteady(t, w, want, "once the object is gone")
				})
			}
		}
	}
}

// someoneElses is the object as another owner would make it under the same name: no owner
// reference to any fleet, another manager's label.
func someoneElses(o kinds.Object) kinds.Object {
	c := o.DeepCopyObject().(kinds.Object)
	c.SetOwnerReferences(nil)
	c.SetUID("")
	c.SetResourceVersion("")
	c.SetNamespace(harness.Namespace)
	c.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "someone-else"})
	// A workload of no members: its controller makes no Pods or claims, which under the
	// fleet's claim names would hold a PersistentFleet again once it is gone.
	switch x := c.(type) {
	case *appsv1.StatefulSet:
		x.Spec.Replicas = ptr(int32(0))
	case *appsv1.Deployment:
		x.Spec.Replicas = ptr(int32(0))
	}
	return c
}

// written is what a write of the object by the operator would change: a workload's status moves
// with its controller, so for one its generation (every spec write), owners and labels; for the
// others their resourceVersion.
func written(o kinds.Object) string {
	switch o.(type) {
	case *appsv1.StatefulSet, *appsv1.Deployment:
		return fmt.Sprintf("generation %d, owners %v, labels %v", o.GetGeneration(), o.GetOwnerReferences(), o.GetLabels())
	}
	return fmt.Sprintf("resourceVersion %s, owners %v, labels %v", o.GetResourceVersion(), o.GetOwnerReferences(), o.GetLabels())
}

func ptr[T any](v T) *T { return &v }

func podUIDs(w *harness.World) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range w.C.Pods(harness.Namespace) {
		out[p.Name] = p.UID
	}
	return out
}

// workloadOf describes the fleet alpha's workload, of either kind: its identity, generation and size.
func workloadOf(w *harness.World) string {
	if s := w.C.StatefulSet(harness.Namespace, "alpha"); s != nil {
		return fmt.Sprintf("StatefulSet uid %s generation %d replicas %d", s.UID, s.Generation, *s.Spec.Replicas)
	}
	if d := w.C.Deployment(harness.Namespace, "alpha"); d != nil {
		return fmt.Sprintf("Deployment uid %s generation %d replicas %d", d.UID, d.Generation, *d.Spec.Replicas)
	}
	return "none"
}
