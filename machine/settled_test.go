package machine

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// A rollout that finished is recorded on the workload (its settled size) by an apply that
// changes nothing else: the step that records it says Ready in the same decision, after the
// apply, rather than in a status write of its own on the next pass. A finished rollout whose
// apply also carries a new template (spec.image changed meanwhile) is not Ready, whether its
// status is written now or once the interval ends.
func TestRecordingTheSettledSizeIsConverged(t *testing.T) {
	for _, newImage := range []bool{false, true} {
		w := newWorld(v1alpha1.ProfilePersistentFleet, 3)
		m := New()
		grown, judged := false, false
		for i := 0; i < 80 && !judged; i++ {
			if i == 20 {
				w.fleet.Spec.Members, w.fleet.Generation = 5, w.fleet.Generation+1
				grown = true
			}
			v := events.Normalize(worldNS, worldName, w.observe())
			if grown && v.Workload.Replicas == 5 && v.Workload.Settled == 3 && v.Workload.RolledOut() && allReady(&v, 5) {
				if newImage {
					w.fleet.Spec.Image, w.fleet.Generation = "registry.example/celld:1.3", w.fleet.Generation+1
					v = events.Normalize(worldNS, worldName, w.observe())
				}
				d := m.Step(&v)
				applied, published, held := -1, -1, false
				var st *v1alpha1.CelldFleetStatus
				for k, a := range d.Actions {
					if _, ok := stsReplicas(a); ok {
						applied = k
					}
					if a.Kind == PublishStatus {
						published, st = k, a.Status
					}
					held = held || a.Kind == Requeue && strings.HasPrefix(a.Key, StatusRequeuePrefix)
				}
				if newImage && published < 0 && held && applied >= 0 {
					// A fleet that is not Ready may wait out the interval like any status; it
					// is not Ready whenever it is written.
					st = &d.Status
				} else if applied < 0 || published < applied {
					t.Fatalf("new image %t: the step that finishes the rollout applies the workload at #%d and publishes at #%d: %v", newImage, applied, published, d.Actions)
				}
				ready := findCondition(st.Conditions, v1alpha1.ConditionReady)
				if got := ready != nil && ready.Status == metav1.ConditionTrue; got == newImage {
					t.Errorf("new image %t: the step that records the settled size publishes Ready=%t (%+v)", newImage, got, ready)
				}
				judged = true
				break
			}
			d := m.Step(&v)
			for _, a := range d.Actions {
				if a.Kind == Requeue {
					continue
				}
				if err := a.Premise.Check(w.fresh(a.Premise)); err != nil {
					break
				}
				if err := w.apply(a); err != nil {
					t.Fatal(err)
				}
			}
			w.tick()
		}
		if !judged {
			t.Fatalf("new image %t: the world never showed the growth to 5 rolled out before it was recorded", newImage)
		}
	}
}

func allReady(v *events.View, n int) bool {
	ready := 0
	for _, mb := range v.Members {
		if mb.Ready {
			ready++
		}
	}
	return ready == n && len(v.Members) == n
}
