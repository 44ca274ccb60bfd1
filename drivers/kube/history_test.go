package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	celldlisters "github.com/celld/celld-operator/api/generated/listers/celld/v1alpha1"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

var reservationsGVR = v1alpha1.SchemeGroupVersion.WithResource("celldreservations")

// reservationServer is a celld.io fake that keeps resourceVersions as the API server does: a
// write that names another resourceVersion than the stored one conflicts, and every write moves
// it on. A patch must be a merge patch of the status subresource that sets nothing but the
// capacity history and its precondition. fail, when set, is the answer to the next patch alone.
type reservationServer struct {
	*celldfake.Clientset
	fail error
}

func newReservationServer(t *testing.T, r *v1alpha1.CelldReservation) *reservationServer {
	t.Helper()
	s := &reservationServer{Clientset: celldfake.NewSimpleClientset(r.DeepCopy())}
	write := func(ns, name, rv string, history []v1alpha1.CapacityDecision) (runtime.Object, error) {
		obj, err := s.Tracker().Get(reservationsGVR, ns, name)
		if err != nil {
			return nil, err
		}
		cur := obj.(*v1alpha1.CelldReservation)
		if rv != "" && rv != cur.ResourceVersion {
			return nil, apierrors.NewConflict(reservationsGVR.GroupResource(), name,
				fmt.Errorf("the object has been modified: resourceVersion %s, stored %s", rv, cur.ResourceVersion))
		}
		n, err := strconv.Atoi(cur.ResourceVersion)
		if err != nil {
			t.Fatalf("stored resourceVersion %q", cur.ResourceVersion)
		}
		next := cur.DeepCopy()
		next.ResourceVersion = strconv.Itoa(n + 1)
		next.Status.CapacityHistory = history
		if err := s.Tracker().Update(reservationsGVR, next, ns); err != nil {
			return nil, err
		}
		return next.DeepCopy(), nil
	}
	s.PrependReactor("patch", "celldreservations", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if err := s.fail; err != nil {
			s.fail = nil
			return true, nil, err
		}
		p := a.(k8stesting.PatchAction)
		if p.GetSubresource() != "status" || p.GetPatchType() != types.MergePatchType {
			t.Errorf("a %s patch of %q; want a merge patch of the status", p.GetPatchType(), p.GetSubresource())
		}
		var body struct {
			Metadata map[string]any `json:"metadata"`
			Status   struct {
				CapacityHistory []v1alpha1.CapacityDecision `json:"capacityHistory"`
			} `json:"status"`
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil || json.Unmarshal(p.GetPatch(), &keys) != nil {
			t.Fatalf("patch %s: %v", p.GetPatch(), err)
		}
		delete(keys, "metadata")
		delete(keys, "status")
		delete(body.Metadata, "resourceVersion")
		if len(keys) != 0 || len(body.Metadata) != 0 {
			t.Errorf("the patch sets more than the history and its precondition: %s", p.GetPatch())
		}
		rv, _ := historyPatch(t, p.GetPatch())
		return writeOf(write(p.GetNamespace(), p.GetName(), rv, body.Status.CapacityHistory))
	})
	s.PrependReactor("update", "celldreservations", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		r := u.GetObject().(*v1alpha1.CelldReservation)
		if u.GetSubresource() != "status" || r.ResourceVersion == "" {
			t.Errorf("an update of %q at resourceVersion %q; want the status at the one read", u.GetSubresource(), r.ResourceVersion)
		}
		return writeOf(write(u.GetNamespace(), r.Name, r.ResourceVersion, r.Status.CapacityHistory))
	})
	return s
}

func writeOf(obj runtime.Object, err error) (bool, runtime.Object, error) { return true, obj, err }

// stored is the reservation as the server holds it.
func (s *reservationServer) stored(t *testing.T, r *v1alpha1.CelldReservation) *v1alpha1.CelldReservation {
	t.Helper()
	obj, err := s.Tracker().Get(reservationsGVR, r.Namespace, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*v1alpha1.CelldReservation)
}

// historyPatch is the resourceVersion a history patch is preconditioned on, and the history it
// writes.
func historyPatch(t *testing.T, body []byte) (string, []v1alpha1.CapacityDecision) {
	t.Helper()
	var p struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status struct {
			CapacityHistory []v1alpha1.CapacityDecision `json:"capacityHistory"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("patch %s: %v", body, err)
	}
	return p.Metadata.ResourceVersion, p.Status.CapacityHistory
}

// lastPatch is the body of the last patch the server got.
func (s *reservationServer) lastPatch(t *testing.T) []byte {
	t.Helper()
	acts := s.Actions()
	for i := len(acts) - 1; i >= 0; i-- {
		if p, ok := acts[i].(k8stesting.PatchAction); ok {
			return p.GetPatch()
		}
	}
	t.Fatal("no patch was sent")
	return nil
}

func decision(from, to int32) v1alpha1.CapacityDecision {
	kind := v1alpha1.DecisionGrow
	if to < from {
		kind = v1alpha1.DecisionShrinkOne
	}
	return v1alpha1.CapacityDecision{Time: metav1.NewTime(time.Unix(int64(100+to), 0)), Kind: kind, From: from, To: to, Source: v1alpha1.SourceManual}
}

// historyOf tells a history by its steps, "3-5 5-4".
func historyOf(h []v1alpha1.CapacityDecision) string {
	var out []string
	for _, d := range h {
		out = append(out, fmt.Sprintf("%d-%d", d.From, d.To))
	}
	return strings.Join(out, " ")
}

type historyFixture struct {
	srv   *reservationServer
	cache cache.Indexer
	ap    *Applier
	r     *v1alpha1.CelldReservation
}

// newHistoryFixture serves stored and caches cached (nothing when nil).
func newHistoryFixture(t *testing.T, stored, cached *v1alpha1.CelldReservation) *historyFixture {
	t.Helper()
	fx := &historyFixture{srv: newReservationServer(t, stored), r: stored,
		cache: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	if cached != nil {
		if err := fx.cache.Add(cached); err != nil {
			t.Fatal(err)
		}
	}
	fx.ap = &Applier{Kube: kubefake.NewClientset(), Celld: fx.srv, Recorder: record.NewFakeRecorder(10),
		Reservations: celldlisters.NewCelldReservationLister(fx.cache)}
	return fx
}

// append appends d and returns the requests it made.
func (fx *historyFixture) append(t *testing.T, d v1alpha1.CapacityDecision) (string, error) {
	t.Helper()
	fx.srv.ClearActions()
	a := machine.Action{Kind: machine.AppendHistory, Key: fmt.Sprintf("history/uid-alpha/%s/%d-%d", d.Kind, d.From, d.To),
		Ref: kinds.Ref{Kind: kinds.Reservation, Namespace: fx.r.Namespace, Name: fx.r.Name}, Decisions: []v1alpha1.CapacityDecision{d}}
	err := fx.ap.Do(context.Background(), &Target{Fleet: testFleet(v1alpha1.ProfileBucket)}, a)
	return verbsOf(fx.srv.Actions()), err
}

func (fx *historyFixture) mustAppend(t *testing.T, d v1alpha1.CapacityDecision, want, why string) {
	t.Helper()
	got, err := fx.append(t, d)
	if err != nil {
		t.Fatalf("append %d-%d: %v", d.From, d.To, err)
	}
	if got != want {
		t.Errorf("append %d-%d made the requests %q; want %q: %s", d.From, d.To, got, want, why)
	}
}

func (fx *historyFixture) wantStored(t *testing.T, want string) {
	t.Helper()
	if got := historyOf(fx.srv.stored(t, fx.r).Status.CapacityHistory); got != want {
		t.Errorf("the stored history is %q; want %q", got, want)
	}
}

// TestAppendHistoryPatchesTheReservationItHolds: a capacity decision is appended in one request,
// a merge patch of the status built on the cached reservation, or on the answer to the previous
// append while the cache lags it, preconditioned on that resourceVersion; a decision already held
// writes nothing. A conflict or a refusal of the patch reads the reservation and updates it, and
// any other error is returned.
func TestAppendHistoryPatchesTheReservationItHolds(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	at := func(rv string, h ...v1alpha1.CapacityDecision) *v1alpha1.CelldReservation {
		r := reservationAt(f, rv)
		r.Status.CapacityHistory = h
		return r
	}
	grow, shrink, again := decision(3, 5), decision(5, 4), decision(4, 3)

	t.Run("on the cache, then on its own answer", func(t *testing.T) {
		cached := at("5")
		fx := newHistoryFixture(t, at("5"), cached)
		fx.mustAppend(t, grow, "patch/status", "no read first")
		if rv, h := historyPatch(t, fx.srv.lastPatch(t)); rv != "5" || historyOf(h) != "3-5" {
			t.Errorf("patch at resourceVersion %q of %q; want the cached 5, and the history with the decision", rv, historyOf(h))
		}
		// The cache has not shown the first append yet: the second is built on its answer.
		fx.mustAppend(t, shrink, "patch/status", "no read, no conflict with its own append")
		if rv, _ := historyPatch(t, fx.srv.lastPatch(t)); rv != "6" {
			t.Errorf("the second patch at resourceVersion %q; want 6, the first one's answer", rv)
		}
		fx.wantStored(t, "3-5 5-4")
		fx.mustAppend(t, shrink, "", "the decision is already held")
		if len(cached.Status.CapacityHistory) != 0 {
			t.Errorf("the cached reservation was modified: %q", historyOf(cached.Status.CapacityHistory))
		}
		// The cache caught up: it is what the next append is built on.
		if err := fx.cache.Update(fx.srv.stored(t, fx.r)); err != nil {
			t.Fatal(err)
		}
		fx.mustAppend(t, shrink, "", "the decision is already held")
		fx.mustAppend(t, again, "patch/status", "no read first")
		fx.wantStored(t, "3-5 5-4 4-3")
	})

	t.Run("a person clears the history after an append", func(t *testing.T) {
		// The append's answer holds the decision; a person then clears the history, and the cache
		// shows that write. The same decision asked again is appended to the cleared history: the
		// answer, which knows nothing of the clear, must not say it is already held.
		fx := newHistoryFixture(t, at("5"), at("5"))
		fx.mustAppend(t, shrink, "patch/status", "no read first")
		cleared := fx.srv.stored(t, fx.r).DeepCopy()
		cleared.Status.CapacityHistory = nil
		cleared.ResourceVersion = "9"
		if err := fx.srv.Tracker().Update(reservationsGVR, cleared, cleared.Namespace); err != nil {
			t.Fatal(err)
		}
		if err := fx.cache.Update(cleared.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		fx.mustAppend(t, shrink, "patch/status", "the cleared history, as the cache shows it")
		if rv, _ := historyPatch(t, fx.srv.lastPatch(t)); rv != "9" {
			t.Errorf("patch at resourceVersion %q; want 9, the cleared reservation's", rv)
		}
		fx.wantStored(t, "5-4")
	})

	t.Run("a step's records in one write", func(t *testing.T) {
		// A scale-in request and its first step: one patch carries both, and the same write
		// asked again (its answer already held) sends nothing.
		request := v1alpha1.CapacityDecision{Time: metav1.NewTime(time.Unix(200, 0)), Kind: v1alpha1.DecisionScaleInRequested, From: 5, To: 3, Source: v1alpha1.SourceManual}
		step := decision(5, 4)
		fx := newHistoryFixture(t, at("5", grow), at("5", grow))
		batch := func() string {
			t.Helper()
			fx.srv.ClearActions()
			a := machine.Action{Kind: machine.AppendHistory, Key: "history/uid-alpha/batch",
				Ref: kinds.Ref{Kind: kinds.Reservation, Namespace: fx.r.Namespace, Name: fx.r.Name}, Decisions: []v1alpha1.CapacityDecision{request, step}}
			if err := fx.ap.Do(context.Background(), &Target{Fleet: testFleet(v1alpha1.ProfileBucket)}, a); err != nil {
				t.Fatal(err)
			}
			return verbsOf(fx.srv.Actions())
		}
		if got := batch(); got != "patch/status" {
			t.Errorf("a step's two records made the requests %q; want one patch", got)
		}
		fx.wantStored(t, "3-5 5-3 5-4")
		if got := batch(); got != "" {
			t.Errorf("the same write again made the requests %q; want none", got)
		}
		fx.wantStored(t, "3-5 5-3 5-4")
	})

	t.Run("already held in the cache", func(t *testing.T) {
		fx := newHistoryFixture(t, at("5", grow), at("5", grow))
		fx.mustAppend(t, grow, "", "a decision already held writes nothing, and reads nothing")
	})

	t.Run("conflict", func(t *testing.T) {
		// Someone else's append the cache has not shown: the patch on the cache conflicts, and
		// the append is made on a fresh read, after it.
		fx := newHistoryFixture(t, at("6", decision(2, 3)), at("5"))
		fx.mustAppend(t, grow, "patch/status get update/status", "a conflict reads and updates")
		fx.wantStored(t, "2-3 3-5")
		fx.mustAppend(t, shrink, "patch/status", "the next append is built on the update's answer")
		if rv, _ := historyPatch(t, fx.srv.lastPatch(t)); rv != "7" {
			t.Errorf("patch at resourceVersion %q; want 7, the update's answer", rv)
		}
		fx.wantStored(t, "2-3 3-5 5-4")
	})

	t.Run("forbidden", func(t *testing.T) {
		// The roles of an older install grant update of the status, not patch.
		fx := newHistoryFixture(t, at("5"), at("5"))
		fx.srv.fail = apierrors.NewForbidden(schema.GroupResource{Group: "celld.io", Resource: "celldreservations/status"}, fx.r.Name, fmt.Errorf("RBAC: patch not allowed"))
		fx.mustAppend(t, grow, "patch/status get update/status", "a refused patch reads and updates")
		fx.wantStored(t, "3-5")
	})

	t.Run("another error", func(t *testing.T) {
		fx := newHistoryFixture(t, at("5"), at("5"))
		fx.srv.fail = apierrors.NewInternalError(fmt.Errorf("etcd is away"))
		got, err := fx.append(t, grow)
		if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "append history/uid-alpha/Grow/3-5") {
			t.Errorf("got %v; want the server's error, naming the append", err)
		}
		if got != "patch/status" {
			t.Errorf("requests %q; want the patch alone", got)
		}
		fx.wantStored(t, "")
	})

	t.Run("nothing cached", func(t *testing.T) {
		fx := newHistoryFixture(t, at("5"), nil)
		fx.mustAppend(t, grow, "get update/status", "without a cached reservation, it is read first")
		fx.mustAppend(t, shrink, "patch/status", "the next append is built on the update's answer")
		fx.mustAppend(t, shrink, "", "the decision is already held")
		fx.wantStored(t, "3-5 5-4")
	})

	t.Run("cached without a resourceVersion", func(t *testing.T) {
		// A patch without one would have no precondition: it would overwrite what it has not seen.
		fx := newHistoryFixture(t, at("5"), at(""))
		fx.mustAppend(t, grow, "get update/status", "a reservation without a resourceVersion is read first")
	})

	t.Run("made again", func(t *testing.T) {
		// The reservation was deleted and made again since the last append: the cache's new
		// object is built on, not the answer about the old one.
		fx := newHistoryFixture(t, at("5"), at("5"))
		fx.mustAppend(t, grow, "patch/status", "no read first")
		again := at("9")
		again.UID = "uid-reservation-2"
		if err := fx.cache.Update(again); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.append(t, shrink); err != nil {
			t.Fatal(err)
		}
		if rv, _ := historyPatch(t, fx.srv.lastPatch(t)); rv != "9" {
			t.Errorf("patch at resourceVersion %q; want 9, the new reservation's", rv)
		}
	})
}

// TestControllerAppendsOnItsCache: the controller's Applier builds a history append on the
// informer's reservation, with no read first.
func TestControllerAppendsOnItsCache(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	r := reservationAt(f, "5")
	srv := newReservationServer(t, r)
	ctl, err := NewController(Clients{Kube: kubefake.NewClientset(), Celld: srv, Recorder: record.NewFakeRecorder(10)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.inf.Reservations.GetIndexer().Add(r.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	d := decision(3, 5)
	a := machine.Action{Kind: machine.AppendHistory, Key: "history", Ref: kinds.Ref{Kind: kinds.Reservation, Namespace: r.Namespace, Name: r.Name}, Decisions: []v1alpha1.CapacityDecision{d}}
	if err := ctl.ap.Do(context.Background(), &Target{Fleet: f}, a); err != nil {
		t.Fatal(err)
	}
	if got := verbsOf(srv.Actions()); got != "patch/status" {
		t.Errorf("requests %q; want one patch, built on the cached reservation", got)
	}
}

// The answers kept for the next append are bounded: one kept for a reservation that is deleted
// before the cache shows it would otherwise stay for the life of the process.
func TestAppendedAnswersAreBounded(t *testing.T) {
	ap := &Applier{}
	for i := range 3 * maxAppended {
		key := fmt.Sprintf("ns/r%d", i)
		ap.remember(key, "1", &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: key, ResourceVersion: "2"}}, nil)
		if n := len(ap.appended); n > maxAppended {
			t.Fatalf("after %d appends %d answers kept, want at most %d", i+1, n, maxAppended)
		}
		if ap.appended[key].answer == nil {
			t.Fatalf("the answer to the latest append (%s) is not kept", key)
		}
	}
	ap.remember("ns/r0", "2", nil, fmt.Errorf("refused"))
	if _, kept := ap.appended["ns/r0"]; kept {
		t.Fatalf("a failed append keeps an answer")
	}
}
