package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/loop"
	"github.com/celld/celld-operator/machine"
)

// quietDriver observes one new PersistentFleet and answers every read and write at once, each
// write after 7 ms at a limiter.
type quietDriver struct{ fleet *v1alpha1.CelldFleet }

func (d quietDriver) Observe(_ context.Context, _ events.FleetKey, now time.Time) (*events.Observation, error) {
	return &events.Observation{Now: now, Fleet: d.fleet, Nodes: map[string]*corev1.Node{}, NodesSynced: true}, nil
}

func (d quietDriver) Fresh(context.Context, *loop.Target, machine.Action) (machine.Fresh, error) {
	return machine.Fresh{FleetGeneration: d.fleet.Generation, Pods: map[string]*corev1.Pod{}}, nil
}

func (d quietDriver) Do(ctx context.Context, _ *loop.Target, _ machine.Action) error {
	loop.TraceFrom(ctx).Limited(7 * time.Millisecond)
	return nil
}

// TestStepsJoinTheOperatorsLines: the lines the loop writes are the ones the bench reads. A
// sync of the shipped loop writes its log; the bench finds in it the fleet's StatefulSet apply of
// 3 replicas, and splits a step ending at that write into parts that add up to the step.
func TestStepsJoinTheOperatorsLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "operator.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fleet := &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: "f0007", Namespace: "bench-scalein-0a1b2c", UID: "uid-f0007", ResourceVersion: "7", Generation: 1},
		Spec:       v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Members: 3, Image: "celld:1"},
	}
	l := loop.New(quietDriver{fleet}, zerolog.New(f), loop.Hooks{})
	rolled := time.Now()
	event := rolled.Add(40 * time.Millisecond)
	for !time.Now().After(event.Add(20 * time.Millisecond)) {
		time.Sleep(5 * time.Millisecond)
	}
	ctx := loop.WithTrace(context.Background(), &loop.Trace{Event: event})
	if _, err := l.Sync(ctx, events.KeyOf(fleet), time.Now()); err != nil {
		t.Fatal(err)
	}
	seen := time.Now().Add(3 * time.Millisecond)
	st, _ := f.Stat()
	f.Close()

	applies := workloadApplies([]logSpan{{path, 0, st.Size()}})
	a, ok := applies[traceKey("f0007", 3)]
	if !ok {
		b, _ := os.ReadFile(path)
		t.Fatalf("no StatefulSet apply of 3 replicas found in the loop's lines: %v\n%s", applies, b)
	}
	if a.limiter != 7 || !a.event.Equal(event.Round(0)) {
		t.Errorf("the apply's line read as %+v, want 7 ms at the limiter and the event at %s", a, event)
	}
	bs := breakdowns([]stepSample{{fleet: "f0007", replicas: 3, rolled: rolled, seen: seen},
		{fleet: "f0008", replicas: 3, rolled: rolled, seen: seen}}, applies)
	b := bs[0]
	if !b.traced || !b.hasEvent || bs[1].traced {
		t.Fatalf("joined %+v and %+v: want the first traced, the second (no line) not", b, bs[1])
	}
	sum := b.informer + b.queue + b.decide + b.before + b.fresh + b.write + b.watch
	if d := sum - b.seconds(); d < -0.004 || d > 0.004 {
		t.Errorf("the parts add up to %.4f s, the step took %.4f s: %+v", sum, b.seconds(), b)
	}
	if b.informer < 0.039 || b.informer > 0.041 || b.queue < 0.015 {
		t.Errorf("informer %.4f s (want the 40 ms from rolled out to the event), queue %.4f s (want at least 20 ms): %+v", b.informer, b.queue, b)
	}
	if b.limiter != 0.007 || b.watch < 0 || b.queue < 0 {
		t.Errorf("limiter %v, watch %v", b.limiter, b.watch)
	}
	if d := b.describe(); !strings.Contains(d, "f0007 -> 3") || !strings.Contains(d, "in the queue") {
		t.Errorf("described as %q", d)
	}
	if sh := shares(bs); !strings.Contains(sh, "(1 of 2 steps traced)") {
		t.Errorf("shares %q", sh)
	}
	// The bench's watch heard of the write before the operator had its answer: 0, not negative.
	early := breakdowns([]stepSample{{fleet: "f0007", replicas: 3, rolled: rolled, seen: applies[traceKey("f0007", 3)].answered.Add(-5 * time.Millisecond)}}, applies)[0]
	if early.watch != 0 {
		t.Errorf("a write seen before its answer: watch %v, want 0", early.watch)
	}
	if s := slowest([]stepBreakdown{{stepSample: stepSample{rolled: rolled, seen: rolled.Add(time.Second)}},
		{stepSample: stepSample{rolled: rolled, seen: rolled.Add(3 * time.Second)}}}, 0.9); len(s) != 1 || s[0].seconds() != 3 {
		t.Errorf("the slowest of two: %+v", s)
	}
}
