package loop

import (
	"context"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// lagging is a fake whose cache lags the operator's own writes of the workload: an Apply of it
// is answered with the object at a new resourceVersion, a fresh read finds it, and the cache
// shows what it is told to.
type lagging struct {
	*fake
	rv             int
	server, cached *appsv1.Deployment
}

func (f *lagging) Observe(ctx context.Context, k events.FleetKey, now time.Time) (*events.Observation, error) {
	o, err := f.fake.Observe(ctx, k, now)
	if f.cached != nil {
		o.Deployment = f.cached.DeepCopy()
	}
	return o, err
}

func (f *lagging) Fresh(ctx context.Context, t *Target, a machine.Action) (machine.Fresh, error) {
	fr, err := f.fake.Fresh(ctx, t, a)
	if f.server != nil {
		fr.WorkloadExists, fr.WorkloadGeneration = true, f.server.Generation
	}
	return fr, err
}

func (f *lagging) Do(ctx context.Context, t *Target, a machine.Action) error {
	if err := f.fake.Do(ctx, t, a); err != nil {
		return err
	}
	if d, ok := a.Object.(*appsv1.Deployment); ok && a.Kind == machine.Apply {
		f.rv++
		next := d.DeepCopy()
		next.ResourceVersion, next.Generation = strconv.Itoa(f.rv), 1
		if f.server != nil {
			next.Generation = f.server.Generation + 1
		}
		f.server = next
		t.Answers = append(t.Answers, next.DeepCopy())
	}
	return nil
}

func (f *lagging) observedDeployment() string {
	if d := f.observed[len(f.observed)-1].Deployment; d != nil {
		return d.ResourceVersion
	}
	return "none"
}

func newLagging() *lagging {
	f := &lagging{fake: newFake(), rv: 200}
	f.fleet.Finalizers = []string{v1alpha1.FleetFinalizer}
	return f
}

// A sync that follows the operator's own create of the workload, before the cache shows it,
// decides on the server's answer: it does not take the workload for absent, decide to create it
// again and have that refused by the premise that says none exists. A cache that still shows
// none after AnswerTTL is believed again.
func TestSyncDecidesOnItsOwnWorkloadWhileTheCacheLags(t *testing.T) {
	f := newLagging()
	var paths pathCount
	l := New(f, nopLog(), Hooks{Path: paths.add})
	ctx := context.Background()
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(100, 0)); err != nil || f.server == nil {
		t.Fatalf("first sync: %v, sent %v: want the workload created", err, f.keys)
	}
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(101, 0)); err != nil {
		t.Fatalf("the sync after its own create, the cache behind it: %v", err)
	}
	if got := f.observedDeployment(); got != "201" {
		t.Errorf("the second sync decided on workload %s, want the answer's 201", got)
	}
	if got := paths.get(); got[PathWorkloadAnswered] != 1 || got[PathWorkloadCaughtUp] != 0 {
		t.Errorf("paths %v; want one sync on the answer, none caught up", got)
	}
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(100, 0).Add(AnswerTTL)); err != nil {
		t.Fatal(err)
	}
	if got := f.observedDeployment(); got != "201" {
		t.Errorf("within AnswerTTL of the write, the sync decided on workload %s, want the answer's 201", got)
	}
	_, _ = l.Sync(ctx, teamAlpha, time.Unix(100, 0).Add(AnswerTTL+time.Second))
	if got := f.observedDeployment(); got != "none" {
		t.Errorf("past AnswerTTL with the cache showing none, the sync decided on workload %s, want none", got)
	}
}

// An answer holds while the cache shows the version the writing sync observed, and goes once it
// shows any other: the write itself, or someone else's since.
func TestSyncDropsItsWorkloadAnswerOnceTheCacheMoves(t *testing.T) {
	f := newLagging()
	var paths pathCount
	l := New(f, nopLog(), Hooks{Path: paths.add})
	ctx := context.Background()
	_, _ = l.Sync(ctx, teamAlpha, time.Unix(100, 0))
	f.cached = f.server.DeepCopy()
	f.cached.Spec.Replicas = nil // the cache has the create; the operator writes again
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(101, 0)); err != nil {
		t.Fatal(err)
	}
	if f.server.ResourceVersion != "202" {
		t.Fatalf("want the workload written again at 202, the server has %s (sent %v)", f.server.ResourceVersion, f.keys)
	}
	if _, err := l.Sync(ctx, teamAlpha, time.Unix(102, 0)); err != nil {
		t.Fatal(err)
	}
	if got := f.observedDeployment(); got != "202" {
		t.Errorf("with the cache at 201 as the writing sync saw it, decided on %s, want the answer's 202", got)
	}
	other := f.server.DeepCopy()
	other.ResourceVersion = "500"
	f.cached = other
	_, _ = l.Sync(ctx, teamAlpha, time.Unix(103, 0))
	if got := f.observedDeployment(); got != "500" {
		t.Errorf("with the cache at someone else's 500, decided on %s, want the cache's", got)
	}
	// The create's answer went when the cache showed 201, the second answer when it showed 500.
	if got := paths.get(); got[PathWorkloadAnswered] != 1 || got[PathWorkloadCaughtUp] != 2 {
		t.Errorf("paths %v; want one sync on the answer and two answers gone", got)
	}
}
