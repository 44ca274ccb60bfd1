package kube

import (
	"slices"
	"sync"

	"k8s.io/client-go/util/workqueue"

	"github.com/celld/celld-operator/events"
)

// answerFirst is the order the fleets' workqueue keeps its waiting keys in (a workqueue.Queue:
// the workqueue still holds each key once and never hands one to two workers). A fleet whose
// members, workload, disks or nodes answered its last action (an answer, marked by the
// informers' handlers) is synced ahead of fleets waiting on their own spec, a resync, a retry
// or a status write of this operator's: a rollout under way is a fleet with a member away, and
// its next step should not wait behind a wave of changes that have not begun. Measured: 500
// fleets scaling in at once, a step rolled out waited up to 7 s in the queue behind the syncs
// of the spec change that started the wave, most of its 9 s.
//
// Answers never starve the rest: while both wait, at most aheadRun answers are taken in a row
// before one key from behind.
type answerFirst struct {
	mu sync.Mutex
	// marked are the keys an answer arrived for since each was last taken: pushed (or, already
	// waiting, touched) they go ahead.
	marked        map[events.FleetKey]bool
	ahead, behind []events.FleetKey
	// run counts the answers taken in a row while keys waited behind.
	run int
}

// aheadRun is how many answers are taken in a row while other keys wait: under a wave, four of
// five free workers go to fleets in motion, and a change that has not begun still starts.
const aheadRun = 4

var _ workqueue.Queue[events.FleetKey] = (*answerFirst)(nil)

func newAnswerFirst() *answerFirst {
	return &answerFirst{marked: map[events.FleetKey]bool{}}
}

// mark tells the queue an answer arrived for key; call it before adding the key. The workqueue
// calls the other methods under its own lock, mark comes from the handlers apart from it.
func (q *answerFirst) mark(key events.FleetKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.marked[key] = true
}

// Touch is called for a key added again while it waits: marked since, it moves ahead. It runs
// under the workqueue's lock for every event of a waiting fleet, and a fleet in motion hears
// several per step: the short line ahead is looked through first, so that only a key's first
// answer looks through the long line behind.
func (q *answerFirst) Touch(key events.FleetKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.marked[key] || slices.Contains(q.ahead, key) {
		return
	}
	if i := slices.Index(q.behind, key); i >= 0 {
		q.behind = slices.Delete(q.behind, i, i+1)
		q.ahead = append(q.ahead, key)
	}
}

// Push adds a key not waiting: ahead when an answer arrived for it since it was last taken.
func (q *answerFirst) Push(key events.FleetKey) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.marked[key] {
		q.ahead = append(q.ahead, key)
	} else {
		q.behind = append(q.behind, key)
	}
}

func (q *answerFirst) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ahead) + len(q.behind)
}

// Pop takes the next key; the workqueue calls it only when Len is above 0. Taking it clears
// its mark: the sync reads everything afresh, so the answer is served.
func (q *answerFirst) Pop() events.FleetKey {
	q.mu.Lock()
	defer q.mu.Unlock()
	var key events.FleetKey
	switch {
	case len(q.ahead) > 0 && (len(q.behind) == 0 || q.run < aheadRun):
		key = take(&q.ahead)
		if len(q.behind) > 0 {
			q.run++
		}
	default:
		key = take(&q.behind)
		q.run = 0
	}
	delete(q.marked, key)
	return key
}

// take takes the first of keys, clearing its place so that the array the slice keeps does not
// hold the key's strings.
func take(keys *[]events.FleetKey) events.FleetKey {
	key := (*keys)[0]
	(*keys)[0] = events.FleetKey{}
	*keys = (*keys)[1:]
	return key
}

// newQueue is the fleets' workqueue, the controllers' usual rate-limited one, keeping its
// waiting keys in order.
func newQueue(order *answerFirst, metrics workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[events.FleetKey] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[events.FleetKey](),
		workqueue.TypedRateLimitingQueueConfig[events.FleetKey]{Name: queueName, MetricsProvider: metrics,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[events.FleetKey]{
				Name: queueName, MetricsProvider: metrics,
				Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[events.FleetKey]{
					Name: queueName, MetricsProvider: metrics, Queue: order}),
			})})
}
