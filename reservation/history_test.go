package reservation

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

func TestAppendSkipsRepeat(t *testing.T) {
	d := v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionShrinkOne, From: 5, To: 4}
	h := Append(nil, d)
	d.Time = metav1.NewTime(t0.Add(time.Second))
	if h2 := Append(h, d); len(h2) != 1 {
		t.Fatalf("a repeated decision was appended twice: %v", h2)
	}
}

// TestAppendAllIsOneWrite: the records of one step appended together; the same write repeated
// changes nothing, a write that only partly overlaps the history's end appends what is new.
func TestAppendAllIsOneWrite(t *testing.T) {
	req := v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}
	step := v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionShrinkOne, From: 6, To: 5}
	grow := v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionGrow, From: 0, To: 6}
	kinds := func(h []v1alpha1.CapacityDecision) []v1alpha1.DecisionKind {
		var out []v1alpha1.DecisionKind
		for _, d := range h {
			out = append(out, d.Kind)
		}
		return out
	}
	h := AppendAll([]v1alpha1.CapacityDecision{grow}, []v1alpha1.CapacityDecision{req, step})
	if got := kinds(h); !slices.Equal(got, []v1alpha1.DecisionKind{v1alpha1.DecisionGrow, v1alpha1.DecisionScaleInRequested, v1alpha1.DecisionShrinkOne}) {
		t.Fatalf("appended: %v", got)
	}
	later := func(d v1alpha1.CapacityDecision) v1alpha1.CapacityDecision {
		d.Time = metav1.NewTime(t0.Add(time.Minute))
		return d
	}
	if again := AppendAll(h, []v1alpha1.CapacityDecision{later(req), later(step)}); len(again) != 3 {
		t.Errorf("the same write repeated appended again: %v", kinds(again))
	}
	// The request alone was recorded before; the write that carries it and the step appends the step.
	h = AppendAll([]v1alpha1.CapacityDecision{grow, req}, []v1alpha1.CapacityDecision{req, step})
	if got := kinds(h); !slices.Equal(got, []v1alpha1.DecisionKind{v1alpha1.DecisionGrow, v1alpha1.DecisionScaleInRequested, v1alpha1.DecisionShrinkOne}) {
		t.Errorf("a write overlapping the history's end: %v", got)
	}
	// A step that ends the history but not after the request is no repeat of the write.
	h = AppendAll([]v1alpha1.CapacityDecision{grow, step}, []v1alpha1.CapacityDecision{req, step})
	if got := kinds(h); !slices.Equal(got, []v1alpha1.DecisionKind{v1alpha1.DecisionGrow, v1alpha1.DecisionShrinkOne, v1alpha1.DecisionScaleInRequested, v1alpha1.DecisionShrinkOne}) {
		t.Errorf("a write whose last record alone ends the history: %v", got)
	}
	// A history that is exactly the write: a repeat too.
	exact := []v1alpha1.CapacityDecision{req, step}
	if again := AppendAll(exact, []v1alpha1.CapacityDecision{later(req), later(step)}); len(again) != 2 {
		t.Errorf("the same write repeated on a history of just that write appended again: %v", kinds(again))
	}
	if got := AppendAll(nil, nil); got != nil {
		t.Errorf("nothing appended to nothing: %v", got)
	}
}
