package kube

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/client-go/util/workqueue"

	"github.com/celld/celld-operator/events"
)

func fkey(name string) events.FleetKey { return events.FleetKey{Namespace: "team", Name: name} }

// testQueue is a fleets' workqueue in answer-first order, shut down when the test ends.
func testQueue(t *testing.T) (*answerFirst, workqueue.TypedRateLimitingInterface[events.FleetKey]) {
	order := newAnswerFirst()
	q := newQueue(order, nil)
	t.Cleanup(q.ShutDown)
	return order, q
}

// answerKey adds key as the handlers do for an answer.
func answerKey(order *answerFirst, q workqueue.TypedRateLimitingInterface[events.FleetKey], key events.FleetKey) {
	order.mark(key)
	q.Add(key)
}

// gets takes n keys from the queue, each done at once.
func gets(t *testing.T, q workqueue.TypedInterface[events.FleetKey], n int) []string {
	t.Helper()
	var got []string
	for range n {
		k, quit := q.Get()
		if quit {
			t.Fatalf("queue shut down after %v", got)
		}
		got = append(got, k.Name)
		q.Done(k)
	}
	return got
}

func TestAnswersGoAhead(t *testing.T) {
	order, q := testQueue(t)

	q.Add(fkey("a"))
	q.Add(fkey("b"))
	// An answer for a fleet not waiting: ahead of both.
	answerKey(order, q, fkey("c"))
	// An answer for a fleet already waiting behind: it moves ahead, after c.
	answerKey(order, q, fkey("b"))
	q.Add(fkey("d"))
	if got, want := gets(t, q, 4), []string{"c", "b", "a", "d"}; !slices.Equal(got, want) {
		t.Errorf("taken %v, want %v", got, want)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("%d keys left, want 0", n)
	}
}

func TestAnswerMarkServedOnce(t *testing.T) {
	order, q := testQueue(t)

	answerKey(order, q, fkey("a"))
	if got := gets(t, q, 1); got[0] != "a" {
		t.Fatalf("taken %v, want a", got)
	}
	// Taken, its answer is served: added again for no answer, it waits its turn.
	q.Add(fkey("b"))
	q.Add(fkey("a"))
	if got, want := gets(t, q, 2), []string{"b", "a"}; !slices.Equal(got, want) {
		t.Errorf("taken %v, want %v", got, want)
	}
}

func TestAnswerWhileSyncing(t *testing.T) {
	order, q := testQueue(t)

	q.Add(fkey("a"))
	k, _ := q.Get() // a syncs
	q.Add(fkey("b"))
	// An answer for a while it syncs: the workqueue holds it until Done, then it goes ahead.
	answerKey(order, q, fkey("a"))
	q.Done(k)
	if got, want := gets(t, q, 2), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("taken %v, want %v", got, want)
	}
}

func TestAnswersDoNotStarveTheRest(t *testing.T) {
	order, q := testQueue(t)

	q.Add(fkey("spec-1"))
	q.Add(fkey("spec-2"))
	for i := range 2 * aheadRun {
		answerKey(order, q, fkey(fmt.Sprintf("answer-%d", i)))
	}
	got := gets(t, q, 2*aheadRun+2)
	// aheadRun answers, then a key from behind, then the next aheadRun, then the last.
	first := slices.Index(got, "spec-1")
	second := slices.Index(got, "spec-2")
	if first != aheadRun || second != 2*aheadRun+1 {
		t.Errorf("taken %v: the keys behind at %d and %d, want %d and %d", got, first, second, aheadRun, 2*aheadRun+1)
	}
	// Answers taken while nothing waits behind are not counted against what comes later.
	for i := range aheadRun - 1 {
		answerKey(order, q, fkey(fmt.Sprintf("alone-%d", i)))
	}
	gets(t, q, aheadRun-1)
	for i := range aheadRun + 1 {
		answerKey(order, q, fkey(fmt.Sprintf("late-%d", i)))
	}
	q.Add(fkey("spec-3"))
	got = gets(t, q, aheadRun+2)
	if i := slices.Index(got, "spec-3"); i != aheadRun {
		t.Errorf("taken %v: spec-3 at %d, want %d", got, i, aheadRun)
	}
}
