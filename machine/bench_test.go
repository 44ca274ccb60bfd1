package machine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/proptest/harness"
)

// views caches convergedView: bringing 99 members to Steady in the simulator takes seconds, and
// the b.N ramp (and -count) would redo it for every run of a sub-benchmark, which made the
// whole run minutes long. Step reads a view and never changes it, so one copy serves every run.
var views = map[string]events.View{}

// convergedView brings a fleet of n members to Steady in the simulator and returns the
// operator's view of it.
func convergedView(b *testing.B, profile v1alpha1.Profile, n int32) events.View {
	b.Helper()
	key := fmt.Sprintf("%s/%d", profile, n)
	if v, ok := views[key]; ok {
		return v
	}
	v := simulateConverged(b, profile, n)
	views[key] = v
	return v
}

func simulateConverged(b *testing.B, profile v1alpha1.Profile, n int32) events.View {
	b.Helper()
	w := harness.NewWorld(int(n)+2, 1)
	if err := w.CreateFleet(harness.FleetSpec{Name: "a", Profile: profile, Members: n, Bucket: "a-bucket", Grace: time.Minute}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < int(n)*10+100; i++ {
		if err := w.Step(1); err != nil {
			b.Fatal(err)
		}
		if f := w.C.Fleet(harness.Namespace, "a"); f != nil && f.Status.State == v1alpha1.StateSteady && f.Status.Members.Ready == n {
			w.Step(2)
			return w.Op.View(harness.Key("a"))
		}
	}
	b.Fatalf("fleet of %d did not converge", n)
	return events.View{}
}

// BenchmarkStepConverged is the operator's steady state: a converged fleet observed again (a
// resync, or an event that changes nothing). It must decide nothing.
func BenchmarkStepConverged(b *testing.B) {
	for _, n := range []int32{3, 9, 99} {
		for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
			b.Run(fmt.Sprintf("%s/members=%d", profile, n), func(b *testing.B) {
				v := convergedView(b, profile, n)
				m := machine.New()
				if d := m.Step(&v); len(d.Actions) != 0 {
					b.Fatalf("a converged fleet decided %v", d.Actions)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					m.Step(&v)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}

// BenchmarkStepChange is a decision that does something: scale-in by one, growth, a lost member.
func BenchmarkStepChange(b *testing.B) {
	for _, n := range []int32{3, 9, 99} {
		v := convergedView(b, v1alpha1.ProfilePersistentFleet, n)
		zero := v
		f := v.Fleet.DeepCopy()
		f.Spec.Capacity.ScaleInStabilization = nil
		for name, edit := range map[string]func(*v1alpha1.CelldFleet){
			"grow":   func(f *v1alpha1.CelldFleet) { f.Spec.Members = n * 2 },
			"shrink": func(f *v1alpha1.CelldFleet) { f.Spec.Members = n - 1 },
			"image":  func(f *v1alpha1.CelldFleet) { f.Spec.Image = "celld:v2"; f.Generation++ },
		} {
			b.Run(fmt.Sprintf("%s/members=%d", name, n), func(b *testing.B) {
				cv := zero
				cf := f.DeepCopy()
				edit(cf)
				cv.Fleet = cf
				m := machine.New()
				if d := m.Step(&cv); len(d.Actions) == 0 {
					b.Fatalf("%s decided nothing", name)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					m.Step(&cv)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}
