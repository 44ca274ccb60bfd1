package reservation

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestTiesAreBrokenByName: reservations of one bucket made in the same second bind it by
// namespace/name, whichever order the cache lists them in; a fleet is never stronger than itself.
func TestTiesAreBrokenByName(t *testing.T) {
	f := fleet("ns", "a", 0, false)
	a, b := reservation("a", time.Hour, f.Spec.Bucket), reservation("b", time.Hour, f.Spec.Bucket)
	for _, rs := range [][]*v1alpha1.CelldReservation{{a, b}, {b, a}} {
		if first, others := Binding(f, rs); first != a || others != 1 {
			t.Errorf("binding of [%s %s]: %v with %d others; want a with 1", rs[0].Name, rs[1].Name, first.Name, others)
		}
	}
	x := fleet("ns", "x", time.Hour, true)
	if Stronger(x, x.DeepCopy()) {
		t.Error("a fleet is stronger than itself: two syncs of one fleet would each see the other first")
	}
}

// TestHistoryKeepsExactlyMaxHistory: a full history stays full, never one short.
func TestHistoryKeepsExactlyMaxHistory(t *testing.T) {
	var h []v1alpha1.CapacityDecision
	for i := range MaxHistory + 3 {
		h = Append(h, v1alpha1.CapacityDecision{Time: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute)), Kind: v1alpha1.DecisionGrow, From: int32(i), To: int32(i + 1)})
		if want := min(i+1, MaxHistory); len(h) != want {
			t.Fatalf("after %d decisions the history holds %d; want %d", i+1, len(h), want)
		}
	}
}

// TestAppendAllRepeatOfTheWholeHistory: a write repeated whose decisions are the whole history is
// that write again, not new decisions.
func TestAppendAllRepeatOfTheWholeHistory(t *testing.T) {
	req := v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionScaleInRequested, From: 6, To: 3}
	step := v1alpha1.CapacityDecision{Time: metav1.NewTime(t0), Kind: v1alpha1.DecisionShrinkOne, From: 6, To: 5}
	h := AppendAll(nil, []v1alpha1.CapacityDecision{req, step})
	if again := AppendAll(h, []v1alpha1.CapacityDecision{req, step}); len(again) != 2 {
		t.Errorf("the one write that made the history, repeated, appended again: %d entries", len(again))
	}
}

// TestEndpointThatIsOnlyTheBucketName: a host that, once canonical, is the bucket's name and a dot
// has no store after the bucket's labels: it is not cut to nothing.
func TestEndpointThatIsOnlyTheBucketName(t *testing.T) {
	if got := Store("https://bkt../", "bkt"); got == "" || got != Store("https://bkt../", "other") {
		t.Errorf("Store of an endpoint that is only the bucket's name: %q; want the host itself, as for any other bucket (%q)", got, Store("https://bkt../", "other"))
	}
}

// TestLegacyNameOfAnEndpoint: the old name carried a hash of the raw endpoint when it had one, and
// was the bare name without.
func TestLegacyNameOfAnEndpoint(t *testing.T) {
	b := v1alpha1.BucketSpec{Name: "bkt"}
	if got := LegacyName(b); got != "bkt" {
		t.Errorf("legacy name without an endpoint: %q, want bkt", got)
	}
	b.Endpoint = "https://s3.example"
	if got := LegacyName(b); got == "bkt" || len(got) != len("bkt-")+8 || got[:4] != "bkt-" {
		t.Errorf("legacy name with an endpoint: %q, want bkt- and 8 hex digits", got)
	}
	other := b
	other.Endpoint = "https://s3.other.example"
	if LegacyName(b) == LegacyName(other) {
		t.Errorf("two endpoints, one legacy name %q", LegacyName(b))
	}
}

// TestTrimKeepsTheStandingRequest: trimming a full history never drops the scale-in request the
// steps after it were taken under: the oldest step after it goes instead. A request that is not
// the oldest entry is kept by dropping the oldest, as any other history is trimmed.
func TestTrimKeepsTheStandingRequest(t *testing.T) {
	at := func(i int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(i) * time.Minute)) }
	req := v1alpha1.CapacityDecision{Time: at(0), Kind: v1alpha1.DecisionScaleInRequested, From: 200, To: 1}
	h := []v1alpha1.CapacityDecision{req}
	for i := 1; len(h) < MaxHistory; i++ {
		h = append(h, v1alpha1.CapacityDecision{Time: at(i), Kind: v1alpha1.DecisionShrinkOne, From: int32(200 - i + 1), To: int32(200 - i)})
	}
	second := h[1]
	got := Append(h, v1alpha1.CapacityDecision{Time: at(500), Kind: v1alpha1.DecisionShrinkOne, From: 10, To: 9})
	if len(got) != MaxHistory || got[0] != req || got[1] == second {
		t.Errorf("trimmed to %d, oldest %s %d->%d, next %s %d->%d; want %d, the request kept and the oldest step after it dropped",
			len(got), got[0].Kind, got[0].From, got[0].To, got[1].Kind, got[1].From, got[1].To, MaxHistory)
	}

	grow := v1alpha1.CapacityDecision{Time: at(0), Kind: v1alpha1.DecisionGrow, From: 0, To: 200}
	h = append([]v1alpha1.CapacityDecision{grow}, h[:MaxHistory-1]...)
	got = Append(h, v1alpha1.CapacityDecision{Time: at(500), Kind: v1alpha1.DecisionShrinkOne, From: 10, To: 9})
	if len(got) != MaxHistory || got[0] != req {
		t.Errorf("trimmed to %d, oldest %s; want %d, the growth before the request dropped", len(got), got[0].Kind, MaxHistory)
	}
}
