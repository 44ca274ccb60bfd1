package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/celld/celld-operator/machine"
)

// traced is the fake whose reads and writes say, through the sync's trace, what they waited for:
// each fresh read 30 ms, each write 5 ms at a limiter.
type traced struct{ *fake }

func (f traced) Fresh(ctx context.Context, t *Target, a machine.Action) (machine.Fresh, error) {
	TraceFrom(ctx).Fresh(30 * time.Millisecond)
	return f.fake.Fresh(ctx, t, a)
}

func (f traced) Do(ctx context.Context, t *Target, a machine.Action) error {
	TraceFrom(ctx).Limited(5 * time.Millisecond)
	return f.fake.Do(ctx, t, a)
}

func actionLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, ok := m["action"]; ok {
			out = append(out, m)
		}
	}
	return out
}

// TestActionLinesSayWhereTheSyncsTimeWent: every action's line carries its own fresh reads and
// limiter waits (not the sync's running total), the sync's start and decision, and, when an
// informer event started the sync, how long the fleet waited in the queue.
func TestActionLinesSayWhereTheSyncsTimeWent(t *testing.T) {
	var buf bytes.Buffer
	f := newFake()
	l := New(traced{f}, zerolog.New(&buf), Hooks{})
	tr := &Trace{Event: time.Now().Add(-2 * time.Second)}
	if _, err := l.Sync(WithTrace(context.Background(), tr), teamAlpha, time.Unix(100, 0)); err != nil {
		t.Fatal(err)
	}
	lines := actionLines(t, &buf)
	if len(lines) < 2 {
		t.Fatalf("want a line per action, got %d: %s", len(lines), buf.String())
	}
	freshLines := 0
	for _, m := range lines {
		if m["limiterMs"] != 5.0 {
			t.Errorf("%s: limiterMs %v, want this action's own 5", m["message"], m["limiterMs"])
		}
		switch m["freshMs"] {
		case 30.0:
			freshLines++
			// The fake's fresh reads take no time on the clock, its writes microseconds: the
			// write's own share is what the action took less its fresh reads, never their sum.
			if w, _ := m["writeMs"].(float64); w >= 15 {
				t.Errorf("%s: writeMs %v counts the fresh reads' 30 as writing", m["message"], w)
			}
		case 0.0:
		default:
			t.Errorf("%s: freshMs %v, want 0 or this action's own 30", m["message"], m["freshMs"])
		}
		if q, _ := m["queuedMs"].(float64); q < 2000 || q > 60000 {
			t.Errorf("%s: queuedMs %v, want the 2 s since the event", m["message"], m["queuedMs"])
		}
		if m["event"] != tr.Event.UTC().Format(time.RFC3339Nano) {
			t.Errorf("%s: event %v, want %s", m["message"], m["event"], tr.Event.UTC().Format(time.RFC3339Nano))
		}
		for _, k := range []string{"syncStart", "answered"} {
			if _, err := time.Parse(time.RFC3339Nano, m[k].(string)); err != nil {
				t.Errorf("%s: %s: %v", m["message"], k, err)
			}
		}
		for _, k := range []string{"decideMs", "beforeMs", "writeMs"} {
			if v, ok := m[k].(float64); !ok || v < 0 {
				t.Errorf("%s: %s %v", m["message"], k, m[k])
			}
		}
	}
	if freshLines == 0 {
		t.Errorf("no line carried a fresh read, though the workload's premise is read fresh: %s", buf.String())
	}

	// A resync or a requeue has no event: no queue time is claimed. A failed action says the same.
	buf.Reset()
	f.fail[machine.AddFinalizer] = errors.New("boom")
	if _, err := l.Sync(WithTrace(context.Background(), &Trace{}), teamAlpha, time.Unix(105, 0)); err == nil {
		t.Fatal("want the finalizer's error")
	}
	lines = actionLines(t, &buf)
	last := lines[len(lines)-1]
	if last["error"] != "boom" || last["syncStart"] == nil || last["limiterMs"] != 5.0 {
		t.Errorf("the failed action's line: %v", last)
	}
	for _, m := range lines {
		if _, ok := m["queuedMs"]; ok {
			t.Errorf("%s: queuedMs without an event", m["message"])
		}
	}

	// Without a trace, a sync logs no timings it did not take.
	buf.Reset()
	delete(f.fail, machine.AddFinalizer)
	if _, err := l.Sync(context.Background(), teamAlpha, time.Unix(110, 0)); err != nil {
		t.Fatal(err)
	}
	lines = actionLines(t, &buf)
	if len(lines) == 0 {
		t.Fatalf("the third sync sent nothing: %s", buf.String())
	}
	for _, m := range lines {
		if _, ok := m["syncStart"]; ok {
			t.Errorf("%s: timings without a trace", m["message"])
		}
	}
}
