package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// stepSample is one scale-in step as the bench's watches saw it: the fleet's StatefulSet had
// rolled out at rolled, and the operator's write of replicas (the next size) showed up at seen.
type stepSample struct {
	fleet        string
	replicas     int32
	rolled, seen time.Time
}

func (s stepSample) seconds() float64 { return s.seen.Sub(s.rolled).Seconds() }

// actionTrace is what the operator's log line of one action says of the sync that sent it
// (loop.Trace): when the sync started, the informer event that queued it, where its time went up
// to and through the action, and when the action's answer came.
type actionTrace struct {
	event, syncStart, answered time.Time
	// milliseconds, as logged
	queued, decide, before, fresh, limiter, write float64
}

// stepBreakdown splits a step's time, from rolled out to the write seen, into consecutive parts:
// informer (until the operator's informer handed over the event that queued the sync; 0 when
// that event came before the rollout ended, or when none did), queue (then until a worker
// started the sync: a wait for a worker, for the fleet's sync in flight, or with no event for a
// requeue or a resync), decide, before (the sync's earlier actions: the capacity history), fresh
// (the premise's reads), write (of it limiter at a client-side limiter), watch (from the write's
// answer to the bench's watch). All in seconds; traced is false when no operator line matched.
type stepBreakdown struct {
	stepSample
	traced, hasEvent                                              bool
	informer, queue, decide, before, fresh, limiter, write, watch float64
}

// traceKey is how an action line and a step meet: the fleet and the replicas it wrote.
func traceKey(fleet string, replicas int32) string {
	return fleet + "/" + strconv.Itoa(int(replicas))
}

// workloadApplies reads the operator's successful StatefulSet applies in the spans, the first for
// each fleet and size: the step's write (a later apply of the same size records the settled
// size, and a retry after a failure is the same step's next try).
func workloadApplies(spans []logSpan) map[string]actionTrace {
	out := map[string]actionTrace{}
	for _, sp := range spans {
		sp.eachLine(func(line []byte) {
			var l struct {
				Fleet, Action, Key, Error    string
				Event, SyncStart, Answered   string
				QueuedMs, DecideMs, BeforeMs float64
				FreshMs, LimiterMs, WriteMs  float64
			}
			if json.Unmarshal(line, &l) != nil || l.Action != "Apply" || l.Error != "" || l.SyncStart == "" ||
				!strings.HasPrefix(l.Key, "apply/StatefulSet/") {
				return
			}
			_, size, ok := strings.Cut(l.Key, "/replicas=")
			r, err := strconv.Atoi(size)
			if !ok || err != nil {
				return
			}
			k := traceKey(l.Fleet, int32(r))
			if _, seen := out[k]; seen {
				return
			}
			t := actionTrace{queued: l.QueuedMs, decide: l.DecideMs, before: l.BeforeMs, fresh: l.FreshMs,
				limiter: l.LimiterMs, write: l.WriteMs}
			t.syncStart, _ = time.Parse(time.RFC3339Nano, l.SyncStart)
			t.answered, _ = time.Parse(time.RFC3339Nano, l.Answered)
			if l.Event != "" {
				t.event, _ = time.Parse(time.RFC3339Nano, l.Event)
			}
			out[k] = t
		})
	}
	return out
}

// breakdowns joins each step to the operator's line of its write.
func breakdowns(steps []stepSample, applies map[string]actionTrace) []stepBreakdown {
	out := make([]stepBreakdown, 0, len(steps))
	for _, s := range steps {
		b := stepBreakdown{stepSample: s}
		if t, ok := applies[traceKey(s.fleet, s.replicas)]; ok && !t.syncStart.IsZero() && !t.answered.IsZero() {
			b.traced, b.hasEvent = true, !t.event.IsZero()
			toSync := t.syncStart.Sub(s.rolled).Seconds()
			if b.hasEvent {
				b.informer = min(max(0, t.event.Sub(s.rolled).Seconds()), max(0, toSync))
			}
			// The bench's watch and the operator's informer are two connections: either may hear of
			// the rollout (or of the write) a few milliseconds before the other. A part that comes
			// out negative that way counts as 0, so the parts may add up to a little more than the
			// step.
			b.queue = max(0, toSync-b.informer)
			b.decide, b.before, b.fresh = t.decide/1000, t.before/1000, t.fresh/1000
			b.write, b.limiter = t.write/1000, t.limiter/1000
			b.watch = max(0, s.seen.Sub(t.answered).Seconds())
		}
		out = append(out, b)
	}
	return out
}

// slowest is the share of the steps, slowest first, at or above the q-quantile of their
// durations (at least one).
func slowest(bs []stepBreakdown, q float64) []stepBreakdown {
	s := append([]stepBreakdown(nil), bs...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].seconds() > s[j].seconds() })
	n := max(1, int(float64(len(s))*(1-q)+0.5))
	return s[:min(n, len(s))]
}

// describe is one step's breakdown, as the report's notes give it.
func (b stepBreakdown) describe() string {
	head := fmt.Sprintf("%s -> %d: %s", b.fleet, b.replicas, durStr(b.seconds()))
	if !b.traced {
		return head + " (no operator line matched)"
	}
	queue := "waiting for a requeue or a resync"
	if b.hasEvent {
		queue = "in the queue"
	}
	return fmt.Sprintf("%s = %s until the operator's informer had the event + %s %s + %s decision + "+
		"%s the sync's earlier actions + %s fresh reads + %s the write (of it %s at a limiter) + %s to the bench's watch",
		head, durStr(b.informer), durStr(b.queue), queue, durStr(b.decide), durStr(b.before), durStr(b.fresh),
		durStr(b.write), durStr(b.limiter), durStr(b.watch))
}

// shares is where the time of bs went in total, each part's share of the steps' summed time.
func shares(bs []stepBreakdown) string {
	var total, informer, queue, requeue, decide, before, fresh, write, limiter, watch float64
	traced := 0
	for _, b := range bs {
		if !b.traced {
			continue
		}
		traced++
		total += b.seconds()
		informer, decide, before = informer+b.informer, decide+b.decide, before+b.before
		if b.hasEvent {
			queue += b.queue
		} else {
			requeue += b.queue
		}
		fresh, write, limiter, watch = fresh+b.fresh, write+b.write, limiter+b.limiter, watch+b.watch
	}
	if traced == 0 || total <= 0 {
		return fmt.Sprintf("no step of %d matched an operator line", len(bs))
	}
	pct := func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v/total) }
	return fmt.Sprintf("the informer %s, the queue %s, waiting for a requeue or a resync %s, decision %s, the sync's "+
		"earlier actions %s, fresh reads %s, the write %s (at a limiter %s), to the bench's watch %s (%d of %d steps traced)",
		pct(informer), pct(queue), pct(requeue), pct(decide), pct(before), pct(fresh), pct(write), pct(limiter), pct(watch),
		traced, len(bs))
}
