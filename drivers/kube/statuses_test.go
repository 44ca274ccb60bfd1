package kube

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
)

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSyncDoesNotWaitForTheStatus: with the API server holding a fleet's status write, the
// fleet's syncs go on, and a sync that observes the fleet while its status is on its way asks for
// no second write.
func TestSyncDoesNotWaitForTheStatus(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	release := make(chan struct{})
	var statusWrites int
	var mu sync.Mutex
	ctl := startedController(t, kube, celld, behind(celld), func() (bool, runtime.Object, error) {
		mu.Lock()
		statusWrites++
		mu.Unlock()
		<-release
		return false, nil, nil
	})
	// The first sync provisions (its history write is the status client's too) and hands its
	// status over; then the writers start, and the API server holds the write.
	first := make(chan error, 1)
	go func() { first <- ctl.Sync(context.Background(), key("team", "alpha")) }()
	select {
	case err := <-first:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the sync waited for its own status write")
	}
	if n := ctl.statuses.Waiting(); n != 1 {
		t.Fatalf("%d fleets with a status handed over, want 1", n)
	}
	waitFor(t, "the caches to show what the sync wrote", func() bool {
		_, ok, _ := ctl.inf.Deployments.GetIndexer().GetByKey("team/alpha")
		return ok
	})
	ctx, cancel := context.WithCancel(context.Background())
	writers := make(chan struct{})
	go func() {
		ctl.statuses.Run(2, ctl.bindWrite(ctx))
		close(writers)
	}()
	defer func() {
		close(release)
		cancel()
		ctl.statuses.Stop()
		<-writers
	}()
	waitFor(t, "the status write in flight", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return statusWrites == 1
	})
	synced := make(chan error, 1)
	go func() { synced <- ctl.Sync(context.Background(), key("team", "alpha")) }()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a sync waited for a status write the API server held")
	}
	waiting, sending := ctl.statuses.Holds(key("team", "alpha"))
	if !sending {
		t.Fatal("the status write in flight is not held")
	}
	if waiting {
		t.Error("the second sync asked for another status write while the first was in flight")
	}
}

// TestFailedStatusWriteIsRequeued: a status write the API server refuses is counted, and its
// fleet synced again, which observes the status missing and asks for it again.
func TestFailedStatusWriteIsRequeued(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	ctl := startedController(t, kube, celld, behind(celld), func() (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is unavailable")
	})
	ctx := context.Background()
	// Every status at once, so that a sync after the caches caught up has nothing to do.
	defer func(d time.Duration) { machine.ProgressInterval = d }(machine.ProgressInterval)
	machine.ProgressInterval = 0
	if err := ctl.Sync(ctx, key("team", "alpha")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the caches to show what the sync wrote", func() bool {
		_, workload, _ := ctl.inf.Deployments.GetIndexer().GetByKey("team/alpha")
		o, _, _ := ctl.inf.Fleets.GetIndexer().GetByKey("team/alpha")
		fleet, _ := o.(*v1alpha1.CelldFleet)
		return workload && fleet != nil && len(fleet.Finalizers) > 0 && len(ctl.inf.Reservations.GetIndexer().List()) > 0
	})
	// Decided on while the status is on its way: the fleet as it will be; the second time,
	// nothing to do (the machine keeps that decision for as long as the view is the same).
	var last loop.Result
	for range 2 {
		res, err := ctl.loop.Sync(ctx, key("team", "alpha"), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	if n := len(last.Decision.Actions); n != 0 {
		t.Fatalf("the second sync while the status is on its way decided %d actions, want none: %+v", n, last.Decision.Actions)
	}
	if n := ctl.statuses.Waiting(); n != 1 {
		t.Fatalf("%d fleets with a status on its way, want 1", n)
	}
	drainStatuses(ctx, ctl.statuses)
	var m dto.Metric
	if err := ctl.metrics.actions.WithLabelValues("PublishStatus", "error").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Errorf("actions{PublishStatus,error} = %v, want 1", n)
	}
	// Requeued with the rate limiter's backoff (the informers' own events queue it too, without).
	if n := ctl.queue.NumRequeues(key("team", "alpha")); n != 1 {
		t.Errorf("the fleet was requeued with backoff %d times, want 1", n)
	}
	// The next sync sees the fleet without the status it asked for, and asks for it again: the
	// caches show what they showed while the write was on its way, but the fleet does not.
	if err := ctl.Sync(ctx, key("team", "alpha")); err != nil {
		t.Fatal(err)
	}
	if n := ctl.statuses.Waiting(); n != 1 {
		t.Errorf("%d fleets with a status handed over after the failed one, want 1", n)
	}
}

// startedController is a controller on these clients with its caches started and synced; the
// status client answers every status write of a fleet with statusWrite.
func startedController(t *testing.T, kube *kubefake.Clientset, celld, status *celldfake.Clientset, statusWrite func() (bool, runtime.Object, error)) *Controller {
	t.Helper()
	status.PrependReactor("patch", "celldfleets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		return statusWrite()
	})
	ctl, err := NewController(Clients{Kube: kube, Celld: celld, Status: status, Recorder: record.NewFakeRecorder(100)},
		Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	ctl.Start(stop)
	waitFor(t, "the caches", ctl.Synced)
	return ctl
}

// drainStatuses writes every status waiting, one at a time, on the caller's goroutine.
func drainStatuses(ctx context.Context, w *loop.StatusWriter) {
	for w.WriteNext(ctx) {
	}
}

// key is the key of fleet name in namespace.
func key(namespace, name string) events.FleetKey {
	return events.FleetKey{Namespace: namespace, Name: name}
}

// TestStatusAnswerMovedPastIsSynced: a status write answered once the caches moved past the
// version it was sent on overlays nothing (loop.StatusWriter.Moved), and its fleet is synced
// again on what the caches show: the syncs that the move caused saw the write in flight.
func TestStatusAnswerMovedPastIsSynced(t *testing.T) {
	f := testFleet(v1alpha1.ProfileBucket)
	kube, celld := kubefake.NewClientset(), celldfake.NewSimpleClientset(f.DeepCopy())
	ctl := startedController(t, kube, celld, behind(celld), func() (bool, runtime.Object, error) { return false, nil, nil })
	for ctl.queue.Len() > 0 {
		k, _ := ctl.queue.Get()
		ctl.queue.Done(k)
	}
	if ctl.statuses.Moved == nil {
		t.Fatal("the status writer tells no one of an answer the caches moved past")
	}
	ctl.statuses.Moved(key("team", "alpha"))
	if n := ctl.queue.Len(); n != 1 {
		t.Fatalf("%d fleets queued after an answer the caches moved past, want 1", n)
	}
	if k, _ := ctl.queue.Get(); k != key("team", "alpha") {
		t.Errorf("queued %v, want team/alpha", k)
	}
}
