package loop

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// fake observes one Bucket fleet with nothing of its own yet, and answers actions as told.
type fake struct {
	fleet    *v1alpha1.CelldFleet
	observed []*events.Observation
	sent     []machine.ActionKind
	keys     []string
	// fail answers an action of that kind with the error.
	fail map[machine.ActionKind]error
	// generation is what a fresh read of the fleet says.
	generation int64
	// observedAt is when the last observation was made, on the clock; decided is the decision time
	// every read and write was handed, and calledAt when each was called.
	observedAt        time.Time
	decided, calledAt []time.Time
}

func (f *fake) Observe(_ context.Context, _ events.FleetKey, now time.Time) (*events.Observation, error) {
	o := &events.Observation{Now: now, Fleet: f.fleet, Nodes: map[string]*corev1.Node{}, NodesSynced: true}
	f.observed = append(f.observed, o)
	f.observedAt = time.Now()
	return o, nil
}

func (f *fake) Fresh(_ context.Context, t *Target, a machine.Action) (machine.Fresh, error) {
	f.decided, f.calledAt = append(f.decided, t.Decided), append(f.calledAt, time.Now())
	return machine.Fresh{FleetGeneration: f.generation, Pods: map[string]*corev1.Pod{}}, nil
}

func (f *fake) Do(_ context.Context, t *Target, a machine.Action) error {
	f.decided, f.calledAt = append(f.decided, t.Decided), append(f.calledAt, time.Now())
	f.sent = append(f.sent, a.Kind)
	f.keys = append(f.keys, a.Key)
	return f.fail[a.Kind]
}

func newFake() *fake {
	return &fake{generation: 1, fail: map[machine.ActionKind]error{}, fleet: &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team", UID: "uid-alpha", ResourceVersion: "7", Generation: 1},
		Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfileBucket, Members: 3, Image: "celld:1",
			Bucket: v1alpha1.BucketSpec{Name: "alpha-data", Region: "eu-west-1"}, Workload: v1alpha1.WorkloadDeployment},
	}}
}

var teamAlpha = events.FleetKey{Namespace: "team", Name: "alpha"}

// A key that names no fleet is dropped before anything is read: a sync of it would observe,
// and could act on, some other object.
func TestSyncDropsAKeyThatNamesNoFleet(t *testing.T) {
	for _, k := range []events.FleetKey{{Namespace: "team"}, {Name: "alpha"}, {Namespace: "team", Name: "a/b"}} {
		f := &fake{fleet: &v1alpha1.CelldFleet{}}
		observed := false
		d := observeSpy{fake: f, observed: &observed}
		res, err := New(d, nopLog(), Hooks{}).Sync(context.Background(), k, time.Unix(100, 0))
		if err != nil || observed || res.Exists {
			t.Errorf("Sync(%+v) = %+v, %v, observed %v; want it dropped unread", k, res, err, observed)
		}
	}
	observed := false
	d := observeSpy{fake: &fake{}, observed: &observed}
	if _, err := New(d, nopLog(), Hooks{}).Sync(context.Background(), teamAlpha, time.Unix(100, 0)); err != nil || !observed {
		t.Errorf("Sync(%v): err %v, observed %v; want it observed", teamAlpha, err, observed)
	}
}

type observeSpy struct {
	*fake
	observed *bool
}

func (s observeSpy) Observe(ctx context.Context, k events.FleetKey, now time.Time) (*events.Observation, error) {
	*s.observed = true
	return s.fake.Observe(ctx, k, now)
}

func TestSyncAppliesInOrderAndStopsAtTheFirstFailure(t *testing.T) {
	f := newFake()
	var acted []machine.ActionKind
	l := New(f, nopLog(), Hooks{Acted: func(_ events.FleetKey, a machine.Action, _ error) { acted = append(acted, a.Kind) }})
	res, err := l.Sync(context.Background(), teamAlpha, time.Unix(100, 0))
	if err != nil || !res.Exists || len(f.sent) == 0 || res.Applied != len(res.Decision.Actions) {
		t.Fatalf("first sync: err %v, applied %d of %d, sent %v", err, res.Applied, len(res.Decision.Actions), f.sent)
	}
	boom := errors.New("boom")
	f.fail[machine.AddFinalizer] = boom
	f.sent = nil
	res, err = l.Sync(context.Background(), teamAlpha, time.Unix(105, 0))
	if !errors.Is(err, boom) {
		t.Fatalf("want the finalizer's error, got %v", err)
	}
	if last := f.sent[len(f.sent)-1]; last != machine.AddFinalizer || res.Applied != len(f.sent)-1 {
		t.Fatalf("sent %v, applied %d: want to stop at the finalizer", f.sent, res.Applied)
	}
	if len(acted) == 0 || acted[len(acted)-1] != machine.AddFinalizer {
		t.Fatalf("the Acted hook missed the failure: %v", acted)
	}
}

func TestSyncConfirmsPremisesOnFreshReads(t *testing.T) {
	f := newFake()
	f.generation = 2 // the user changed the spec after the cache saw it
	l := New(f, nopLog(), Hooks{})
	_, err := l.Sync(context.Background(), teamAlpha, time.Unix(100, 0))
	if !errors.Is(err, machine.ErrPremiseChanged) {
		t.Fatalf("want the workload write refused by its premise, got %v", err)
	}
	for _, k := range f.keys {
		if strings.HasPrefix(k, "apply/Deployment") {
			t.Fatalf("the workload was written though its premise no longer held: %v", f.keys)
		}
	}
}

// TestSyncTellsTheDriverWhenItDecided: every read and write of a sync carries when the machine
// decided, on the process's clock with its monotonic reading: after the observation was made,
// before the first request, and not the observation's Now, which a driver cannot compare with
// when its reads were sent.
func TestSyncTellsTheDriverWhenItDecided(t *testing.T) {
	f := newFake()
	l := New(f, nopLog(), Hooks{})
	res, err := l.Sync(context.Background(), teamAlpha, time.Unix(100, 0))
	if err != nil || len(f.decided) == 0 {
		t.Fatalf("err %v, %d requests", err, len(f.decided))
	}
	premises := 0
	for _, a := range res.Decision.Actions {
		if a.Premise != nil {
			premises++
		}
	}
	if premises == 0 {
		t.Fatal("the first sync has no action with a premise: no fresh read carried the decision time")
	}
	decided := f.decided[0]
	if !strings.Contains(decided.String(), " m=") {
		t.Errorf("the decision time %s has no monotonic reading", decided)
	}
	if decided.Before(f.observedAt) || decided.After(f.calledAt[0]) {
		t.Errorf("decided at %s; want after the observation (%s) and before the first request (%s)", decided, f.observedAt, f.calledAt[0])
	}
	for i, d := range f.decided {
		if !d.Equal(decided) {
			t.Errorf("request %d carries decision time %s; want the sync's one, %s", i, d, decided)
		}
	}

	// The next sync decides again, later.
	f.decided, f.calledAt = nil, nil
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if len(f.decided) > 0 && !f.decided[0].After(decided) {
		t.Errorf("the second sync decided at %s, not after the first (%s)", f.decided[0], decided)
	}
}

// A reservation the API server refuses to create is remembered like a refused workload: the
// fleet is Degraded on the refusal rather than retrying it blindly.
func TestSyncRemembersARefusedBind(t *testing.T) {
	f := newFake()
	l := New(f, nopLog(), Hooks{})
	f.fail[machine.BindReservation] = apierrors.NewInvalid(schema.GroupKind{Group: "celld.io", Kind: "CelldReservation"}, "r",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "", "refused")})
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(100, 0)); !apierrors.IsInvalid(err) {
		t.Fatalf("want the refusal, got %v", err)
	}
	f.fail = map[machine.ActionKind]error{}
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(105, 0)); err != nil {
		t.Fatal(err)
	}
	if r := f.observed[len(f.observed)-1].Refused; r == nil || !strings.HasPrefix(r.Object, "CelldReservation/") {
		t.Fatalf("the next observation lacks the bind's refusal: %+v", r)
	}
	// A failure of another kind is the sync's error, not a refusal of the spec.
	f = newFake()
	l = New(f, nopLog(), Hooks{})
	f.fail[machine.AddFinalizer] = apierrors.NewInvalid(schema.GroupKind{Group: "celld.io", Kind: "CelldFleet"}, "alpha",
		field.ErrorList{field.Invalid(field.NewPath("metadata"), "", "refused")})
	_, _ = l.Sync(context.Background(), teamAlpha, time.Unix(100, 0))
	f.fail = map[machine.ActionKind]error{}
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(105, 0)); err != nil {
		t.Fatal(err)
	}
	if r := f.observed[len(f.observed)-1].Refused; r != nil {
		t.Fatalf("a refused finalizer is taken for a refused spec: %+v", r)
	}
}

func TestSyncRemembersRefusalsAndForgetsGoneFleets(t *testing.T) {
	f := newFake()
	var gone events.FleetKey
	l := New(f, nopLog(), Hooks{Forgot: func(k events.FleetKey) { gone = k }})
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "alpha",
		field.ErrorList{field.Invalid(field.NewPath("spec"), "", "refused")})
	f.fail[machine.Apply] = invalid
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(100, 0)); !apierrors.IsInvalid(err) {
		t.Fatalf("want the refusal, got %v", err)
	}
	f.fail = map[machine.ActionKind]error{}
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(105, 0)); err != nil {
		t.Fatal(err)
	}
	if r := f.observed[len(f.observed)-1].Refused; r == nil || r.Generation != 1 {
		t.Fatalf("the next observation lacks the refusal: %+v", r)
	}
	// Held sync after sync until the spec changes: the fleet's memory is kept while it is the
	// same fleet.
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(106, 0)); err != nil {
		t.Fatal(err)
	}
	if r := f.observed[len(f.observed)-1].Refused; r == nil {
		t.Fatal("the third observation lost the refusal")
	}
	// A fleet recreated under the same name is another fleet: its predecessor's refusal is not
	// its own.
	f.fleet = f.fleet.DeepCopy()
	f.fleet.UID = "uid-alpha-2"
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(107, 0)); err != nil {
		t.Fatal(err)
	}
	if r := f.observed[len(f.observed)-1].Refused; r != nil {
		t.Fatalf("the recreated fleet observes its predecessor's refusal: %+v", r)
	}
	f.fleet = nil
	if res, err := l.Sync(context.Background(), teamAlpha, time.Unix(110, 0)); err != nil || res.Exists {
		t.Fatalf("a gone fleet: %v %v", res.Exists, err)
	}
	if gone != teamAlpha || l.Remembered() != 0 {
		t.Fatalf("forgot %q, remembers %d", gone, l.Remembered())
	}
}

// answering is a fake whose caches lag the operator's own writes of the fleet: a status write is
// answered with the fleet at a new resourceVersion, which the cache shows only when told.
type answering struct {
	*fake
	rv     int
	answer *v1alpha1.CelldFleet
}

func (f *answering) Do(ctx context.Context, t *Target, a machine.Action) error {
	if err := f.fake.Do(ctx, t, a); err != nil {
		return err
	}
	if a.Kind == machine.PublishStatus {
		f.rv++
		got := t.Fleet.DeepCopy()
		got.ResourceVersion = strconv.Itoa(f.rv)
		got.Status = *a.Status.DeepCopy()
		t.Fleet, f.answer = got, got
	}
	return nil
}

func (f *answering) catchUp() { f.fleet = f.answer.DeepCopy() }

func statusWrites(kinds []machine.ActionKind) int {
	n := 0
	for _, k := range kinds {
		if k == machine.PublishStatus {
			n++
		}
	}
	return n
}

// A sync that follows the operator's own status write before the cache shows it decides on the
// server's answer to that write, not on the older cached status: it does not write the same
// status again. Once the cache shows another version of the fleet (its own or someone else's),
// the cache is what it decides on.
func TestSyncDecidesOnItsOwnAnswerWhileTheCacheLags(t *testing.T) {
	f := &answering{fake: newFake(), rv: 100}
	f.fleet.Finalizers = []string{v1alpha1.FleetFinalizer}
	l := New(f, nopLog(), Hooks{})
	ctx := context.Background()
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if statusWrites(f.sent) != 1 {
		t.Fatalf("first sync sent %v: want one status write", f.sent)
	}
	f.sent = nil
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if n := statusWrites(f.sent); n != 0 {
		t.Fatalf("with the cache behind its own status write, the next sync wrote the status %d more times (%v)", n, f.sent)
	}
	if got := f.observed[len(f.observed)-1].Fleet.ResourceVersion; got != "101" {
		t.Errorf("the second sync decided on resourceVersion %s, want the answer's 101", got)
	}
	// Someone else writes the fleet; the cache shows that, with the old status: the answer no
	// longer holds, and the status is written again once the interval since the last write ends.
	other := f.fleet.DeepCopy()
	other.ResourceVersion = "500"
	f.fleet = other
	f.sent = nil
	later := time.Unix(100, 0).Add(machine.ProgressInterval)
	if _, err := l.Sync(ctx, teamAlpha, later); err != nil {
		t.Fatal(err)
	}
	if got := f.observed[len(f.observed)-1].Fleet.ResourceVersion; got != "500" {
		t.Errorf("with the cache at another version, the sync decided on %s, want the cache's 500", got)
	}
	if statusWrites(f.sent) != 1 {
		t.Errorf("the cache shows a status that is not the decided one: sent %v, want one status write", f.sent)
	}
	// A fleet made again under the same name is another fleet, even at the resourceVersion the
	// answer about the old one was kept on.
	again := f.fleet.DeepCopy()
	again.UID, again.Status = "uid-again", v1alpha1.CelldFleetStatus{}
	f.fleet = again
	f.sent = nil
	if _, err := l.Sync(ctx, teamAlpha, later); err != nil {
		t.Fatal(err)
	}
	if got := f.observed[len(f.observed)-1].Fleet.UID; got != "uid-again" {
		t.Errorf("the new fleet decided on as %s", got)
	}
}

// Once the cache shows the operator's own write, there is nothing to write again.
func TestSyncWritesNothingOnceTheCacheShowsItsAnswer(t *testing.T) {
	f := &answering{fake: newFake(), rv: 100}
	f.fleet.Finalizers = []string{v1alpha1.FleetFinalizer}
	l := New(f, nopLog(), Hooks{})
	ctx := context.Background()
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	f.catchUp()
	f.sent = nil
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	if statusWrites(f.sent) != 0 {
		t.Errorf("the cache shows the written status: sent %v", f.sent)
	}
}

// TestSyncTakesATerminatingNamespaceForNoRefusal: a create refused because the fleet's namespace
// is being deleted is not a refusal of the fleet's spec (no Degraded, no hold for a minute): the
// namespace's deletion takes the fleet too.
func TestSyncTakesATerminatingNamespaceForNoRefusal(t *testing.T) {
	f := newFake()
	var requeued []time.Duration
	l := New(f, nopLog(), Hooks{Requeue: func(_ events.FleetKey, after time.Duration) { requeued = append(requeued, after) }})
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "celld.io", Resource: "celldreservations"}, "alpha-data",
		errors.New("unable to create new content in namespace team because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace team is being terminated", Field: "metadata.namespace"}}
	f.fail[machine.BindReservation] = terminating
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(100, 0)); !apierrors.IsForbidden(err) {
		t.Fatalf("want the refusal as the sync's error, got %v", err)
	}
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(105, 0)); !apierrors.IsForbidden(err) {
		t.Fatalf("want the refusal again, got %v", err)
	}
	if r := f.observed[len(f.observed)-1].Refused; r != nil {
		t.Fatalf("a terminating namespace is taken for a refused spec: %+v", r)
	}
	if len(requeued) != 0 {
		t.Errorf("requeued after %v as a Forbidden that may pass; want the queue's backoff alone", requeued)
	}
	// Any other Forbidden is still a refusal that holds the fleet.
	f, requeued = newFake(), nil
	l = New(f, nopLog(), Hooks{Requeue: func(_ events.FleetKey, after time.Duration) { requeued = append(requeued, after) }})
	f.fail[machine.BindReservation] = apierrors.NewForbidden(schema.GroupResource{Group: "celld.io", Resource: "celldreservations"}, "alpha-data",
		errors.New("denied by policy"))
	_, _ = l.Sync(context.Background(), teamAlpha, time.Unix(100, 0))
	_, _ = l.Sync(context.Background(), teamAlpha, time.Unix(105, 0))
	if r := f.observed[len(f.observed)-1].Refused; r == nil {
		t.Fatal("a Forbidden bind is not a refusal")
	}
	if len(requeued) == 0 || requeued[0] != ForbiddenRetry {
		t.Errorf("a Forbidden bind requeued after %v, want %v", requeued, ForbiddenRetry)
	}
}

// TestSyncTellsTheMachineWhatWasWritten: the machine paces its status on the writes the loop
// acknowledged. A status written a moment ago holds the next change back for the rest of the
// interval; a status whose write failed does not.
func TestSyncTellsTheMachineWhatWasWritten(t *testing.T) {
	for _, failed := range []bool{false, true} {
		f := &answering{fake: newFake(), rv: 100}
		f.fleet.Finalizers = []string{v1alpha1.FleetFinalizer}
		if failed {
			f.fail[machine.PublishStatus] = errors.New("etcd is unavailable")
		}
		l := New(f, nopLog(), Hooks{})
		ctx := context.Background()
		_, _ = l.Sync(ctx, teamAlpha, time.Unix(100, 0))
		if statusWrites(f.sent) != 1 {
			t.Fatalf("failed %v: the first sync sent %v, want one status write", failed, f.sent)
		}
		if !failed {
			f.catchUp()
		}
		delete(f.fail, machine.PublishStatus)
		changed := f.fleet.DeepCopy()
		changed.Spec.Members, changed.Generation, changed.ResourceVersion = 4, 2, "300"
		f.fleet, f.generation, f.sent = changed, 2, nil
		res, err := l.Sync(ctx, teamAlpha, time.Unix(101, 0))
		if err != nil {
			t.Fatal(err)
		}
		// A requeue is made by asking for it: every action counts as made, so the machine
		// learns of each.
		if res.Applied != len(res.Decision.Actions) {
			t.Errorf("failed %v: %d of %d actions counted as made (%v)", failed, res.Applied, len(res.Decision.Actions), res.Decision.Actions)
		}
		if got, want := statusWrites(f.sent), map[bool]int{false: 0, true: 1}[failed]; got != want {
			t.Errorf("failed %v: a change a second after the first status: %d status writes, want %d (%v)", failed, got, want, f.sent)
		}
	}
}
