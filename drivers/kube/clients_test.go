package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/render"
)

// standIn answers every request the way an API server would for the objects the limiter test
// asks about, and tells each request that reaches it as "METHOD path".
type standIn struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
	got  chan string
}

func newStandIn(t *testing.T) *standIn {
	t.Helper()
	s := &standIn{got: make(chan string, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := r.Method + " " + r.URL.Path
		s.mu.Lock()
		s.seen = append(s.seen, req)
		s.mu.Unlock()
		s.got <- req
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(r.URL.Path, "/celldfleets/"):
			fmt.Fprint(w, `{"apiVersion":"celld.io/v1alpha1","kind":"CelldFleet","metadata":{"name":"alpha","namespace":"team","uid":"uid-alpha","resourceVersion":"8"}}`)
		case strings.HasSuffix(r.URL.Path, "/events"):
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"alpha.1","namespace":"team"}}`)
		case strings.Contains(r.URL.Path, "/pods/"):
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"alpha-0","namespace":"team"}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *standIn) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// waitFor waits until a request matching want reaches the stand-in.
func (s *standIn) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-s.got:
			if strings.HasPrefix(got, want) {
				return
			}
		case <-deadline:
			t.Fatalf("%q never reached the API server in %s (it got %q): it waits behind another kind's limiter", want, within, s.requests())
		}
	}
}

// throttled says a request was held by its client's limiter: it failed, and never left.
func throttled(t *testing.T, s *standIn, what string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("%s: %v; want it held by its client's limiter (its token is spent)", what, err)
	}
	for _, r := range s.requests() {
		if strings.Contains(r, what) {
			t.Errorf("%s reached the API server (%q)", what, s.requests())
		}
	}
}

// TestClientsHaveALimiterPerKindOfWork: the status writes, the Events and the writes that move
// fleets each spend the tokens of a limiter of their own, so neither a status write nor an Event
// makes a StatefulSet apply or a member's delete wait; the Kubernetes and celld.io clients that
// move fleets share one limiter. Every limiter here holds one token and refills in about 17
// minutes: a request that would wait for a second token fails at once (its context's deadline
// is shorter).
func TestClientsHaveALimiterPerKindOfWork(t *testing.T) {
	api := newStandIn(t)
	clients, stop, err := NewClients(&rest.Config{Host: api.URL, QPS: 0.001, Burst: 1}, ClientLimits{})
	if err != nil {
		t.Fatal(err)
	}
	// The broadcaster flushes on stop; with a broken limiter it may wait forever.
	t.Cleanup(func() { go stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := testFleet(v1alpha1.ProfileBucket)

	// A status write spends the status client's token.
	if _, err := clients.Status.CelldV1alpha1().CelldFleets("team").Patch(ctx, "alpha", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/status","value":{}}]`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the first status write: %v", err)
	}
	// An Event spends the events client's.
	clients.Recorder.Event(f, corev1.EventTypeNormal, "Test", "one event")
	api.waitFor(t, "POST /api/v1/namespaces/team/events", 5*time.Second)
	// A write that moves a fleet, or its premise's fresh read, still goes out at once.
	if _, err := clients.Kube.CoreV1().Pods("team").Get(ctx, "alpha-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("a Pod read after a status write and an Event waited: %v", err)
	}

	// A second request on the same client waits for a token of that client.
	_, err = clients.Kube.CoreV1().Pods("team").Get(ctx, "alpha-1", metav1.GetOptions{})
	throttled(t, api, "/pods/alpha-1", err)
	_, err = clients.Status.CelldV1alpha1().CelldFleets("team").Patch(ctx, "beta", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/status","value":{}}]`), metav1.PatchOptions{}, "status")
	throttled(t, api, "/celldfleets/beta", err)
	// The celld.io client that moves fleets spent its token with the Kubernetes one's Pod read.
	_, err = clients.Celld.CelldV1alpha1().CelldFleets("team").Get(ctx, "gamma", metav1.GetOptions{})
	throttled(t, api, "/celldfleets/gamma", err)
}

// TestStatusWritesGoThroughTheStatusClient: the Applier writes a fleet's status and a
// reservation's history through Status, never through the clients that move fleets, and
// NewController hands it the Status of its Clients.
func TestStatusWritesGoThroughTheStatusClient(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	st := v1alpha1.CelldFleetStatus{State: v1alpha1.StateSteady, ObservedGeneration: 1}
	d := v1alpha1.CapacityDecision{Time: metav1.NewTime(time.Unix(100, 0)), Kind: v1alpha1.DecisionGrow, From: 3, To: 5, Source: v1alpha1.SourceManual}
	r := reservationAt(f, "5")
	kube, moving := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy(), r.DeepCopy())
	status := behind(moving)
	ap := &Applier{Kube: kube, Celld: moving, Status: status, Recorder: record.NewFakeRecorder(10)}
	for _, a := range []machine.Action{
		{Kind: machine.PublishStatus, Key: "status/team/alpha", Ref: kinds.Ref{Namespace: f.Namespace, Name: f.Name}, Status: &st},
		{Kind: machine.AppendHistory, Key: "history", Ref: kinds.Ref{Namespace: r.Namespace, Name: r.Name}, Decisions: []v1alpha1.CapacityDecision{d}},
	} {
		if err := ap.Do(context.Background(), &Target{Fleet: f}, a); err != nil {
			t.Fatalf("%s: %v", a.Kind, err)
		}
	}
	if got := verbsOf(status.Actions()); got != "patch/status get update/status" {
		t.Errorf("the status client got %q; want the fleet's status patch, then the history's read and update", got)
	}
	if n := len(moving.Actions()) + len(kube.Actions()); n != 0 {
		t.Errorf("the clients that move fleets got %d requests: %q %q", n, verbsOf(moving.Actions()), verbsOf(kube.Actions()))
	}
	// A finalizer moves the fleet: it is the moving client's.
	status.ClearActions()
	if err := ap.Do(context.Background(), &Target{Fleet: f}, machine.Action{Kind: machine.AddFinalizer, Key: "finalizer",
		Ref: kinds.Ref{Namespace: f.Namespace, Name: f.Name}}); err != nil {
		t.Fatal(err)
	}
	if got, other := verbsOf(moving.Actions()), verbsOf(status.Actions()); got != "patch" || other != "" {
		t.Errorf("the finalizer went as %q through the client that moves fleets and %q through the status client; want one patch, through the first", got, other)
	}

	// Wired by NewController: the first sync's status write is the status client's.
	kube, moving = kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	status = behind(moving)
	ctl, err := NewController(Clients{Kube: kube, Celld: moving, Status: status, Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.inf.Fleets.GetIndexer().Add(f); err != nil {
		t.Fatal(err)
	}
	if err := ctl.syncAndWrite(context.Background(), key("team", "alpha")); err != nil {
		t.Fatal(err)
	}
	var statusReqs, movingReqs []string
	for _, a := range status.Actions() {
		statusReqs = append(statusReqs, describe(a))
	}
	for _, a := range moving.Actions() {
		movingReqs = append(movingReqs, describe(a))
	}
	if !contains(statusReqs, "patch celldfleets/status json") {
		t.Errorf("the status client got %q; want the fleet's status patch", statusReqs)
	}
	if strings.Contains(strings.Join(movingReqs, " "), "/status") {
		t.Errorf("a status write went through the client that moves fleets: %q", movingReqs)
	}
}

// behind is another client of the same API server as c: its requests are recorded apart, and
// answered from c's objects.
func behind(c *celldfake.Clientset) *celldfake.Clientset {
	other := celldfake.NewSimpleClientset()
	other.PrependReactor("*", "*", k8stesting.ObjectReaction(c.Tracker()))
	return other
}

// reservationAt is the fleet's reservation as the API server stores it at resourceVersion rv.
func reservationAt(f *v1alpha1.CelldFleet, rv string) *v1alpha1.CelldReservation {
	r := render.RenderReservation(f)
	r.UID, r.ResourceVersion = "uid-reservation", rv
	return r
}

// TestLimiterWaitsAreTraced: a request that waits for a token adds its wait to the trace of the
// sync that sent it, so that a slow step's log line shows its time at the limiter; the client
// that moves fleets, run without a limiter, adds none.
func TestLimiterWaitsAreTraced(t *testing.T) {
	api := newStandIn(t)
	for _, c := range []struct {
		name      string
		limits    ClientLimits
		wantWaits bool
	}{{"limited", ClientLimits{}, true}, {"moving unlimited", ClientLimits{MovingUnlimited: true}, false}} {
		// 2 per second, one at once: the second read waits for its token what is left of 500 ms
		// after the first read, well over 100 ms unless that read took 400 (a slower limiter
		// would only slow the test; a faster one flaked on a loaded machine, where the first
		// read outlasted the interval).
		clients, stop, err := NewClients(&rest.Config{Host: api.URL, QPS: 2, Burst: 1}, c.limits)
		if err != nil {
			t.Fatal(err)
		}
		tr := &loop.Trace{}
		ctx := loop.WithTrace(context.Background(), tr)
		for _, pod := range []string{"alpha-0", "alpha-1"} {
			if _, err := clients.Kube.CoreV1().Pods("team").Get(ctx, pod, metav1.GetOptions{}); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		// A request without a trace waits all the same, and records nowhere.
		if _, err := clients.Kube.CoreV1().Pods("team").Get(context.Background(), "alpha-2", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		go stop()
		_, waited := tr.Take()
		if c.wantWaits && waited < 100*time.Millisecond {
			t.Errorf("%s: %s at the limiter traced, want the second read's wait of up to 500ms", c.name, waited)
		}
		if !c.wantWaits && waited != 0 {
			t.Errorf("%s: %s at a limiter traced, though the client has none", c.name, waited)
		}
	}
}
