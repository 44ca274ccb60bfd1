package loop

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Trace is where one sync's time went, for the log line of each action it sends: a slow step is
// then explained by its own line (the queue, the decision, the actions before it, the fresh reads
// of its premise, the client-side limiter, the write's round trip) rather than guessed at from
// histograms. The driver puts it in the sync's context (WithTrace) and its clients add what they
// waited for; a context without one records nothing.
type Trace struct {
	// Event is when the first informer event since the fleet's last sync arrived; zero when the
	// sync was a resync or a requeue.
	Event time.Time

	mu      sync.Mutex
	fresh   time.Duration // the current action's fresh reads
	limiter time.Duration // the current action's waits at a client-side limiter
}

type traceKey struct{}

// WithTrace is ctx carrying t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom is the trace ctx carries, nil when none.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Fresh adds d to the current action's fresh reads. A nil trace ignores it.
func (t *Trace) Fresh(d time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.fresh += d
	t.mu.Unlock()
}

// Limited adds d to the current action's waits at a client-side limiter. A nil trace ignores it.
func (t *Trace) Limited(d time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.limiter += d
	t.mu.Unlock()
}

// Take returns the current action's fresh reads and limiter waits and starts the next action's.
func (t *Trace) Take() (fresh, limiter time.Duration) {
	if t == nil {
		return 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fresh, limiter = t.fresh, t.limiter
	t.fresh, t.limiter = 0, 0
	return fresh, limiter
}

// syncTimes are the instants of one sync that each of its action lines reports.
type syncTimes struct {
	trace   *Trace
	start   time.Time // the sync began: the worker took the key from the queue
	decided time.Time
}

// fields adds to an action's log line where the sync's time went up to and through the action
// sent at sent, which took took: freshMs and writeMs split took, and limiterMs is the part of
// both spent waiting at a client-side limiter. Every duration is in milliseconds, so that a
// reader joins lines without parsing Go durations; the instants are RFC 3339 with nanoseconds.
func (s syncTimes) fields(e *zerolog.Event, sent time.Time, took time.Duration) {
	fresh, limiter := s.trace.Take()
	if s.trace == nil {
		return
	}
	if !s.trace.Event.IsZero() {
		e.Str("event", s.trace.Event.UTC().Format(time.RFC3339Nano)).
			Float64("queuedMs", ms(s.start.Sub(s.trace.Event)))
	}
	e.Str("syncStart", s.start.UTC().Format(time.RFC3339Nano)).
		Float64("decideMs", ms(s.decided.Sub(s.start))).
		Float64("beforeMs", ms(sent.Sub(s.decided))).
		Float64("freshMs", ms(fresh)).
		Float64("limiterMs", ms(limiter)).
		Float64("writeMs", ms(max(0, took-fresh))).
		Str("answered", sent.Add(took).UTC().Format(time.RFC3339Nano))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
