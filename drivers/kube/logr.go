package kube

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
)

// Logr adapts a zerolog logger to logr, so client-go's klog output (leader election, reflector
// errors) comes out as the operator's own structured lines. klog's verbosity still gates its
// V(n) lines; of those that pass, V(0) logs at info and the rest at debug.
func Logr(l zerolog.Logger) logr.Logger { return logr.New(&zerologSink{l: l}) }

type zerologSink struct {
	l    zerolog.Logger
	name string
}

func (s *zerologSink) Init(logr.RuntimeInfo) {}

func (s *zerologSink) Enabled(level int) bool {
	if level > 0 {
		return s.l.GetLevel() <= zerolog.DebugLevel
	}
	return s.l.GetLevel() <= zerolog.InfoLevel
}

func (s *zerologSink) Info(level int, msg string, kv ...any) {
	ev := s.l.Info()
	if level > 0 {
		ev = s.l.Debug()
	}
	s.fields(ev, kv).Msg(msg)
}

func (s *zerologSink) Error(err error, msg string, kv ...any) {
	s.fields(s.l.Error().Err(err), kv).Msg(msg)
}

func (s *zerologSink) fields(ev *zerolog.Event, kv []any) *zerolog.Event {
	if s.name != "" {
		ev = ev.Str("logger", s.name)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		ev = ev.Interface(fmt.Sprint(kv[i]), loggable(kv[i+1]))
	}
	return ev
}

func (s *zerologSink) WithValues(kv ...any) logr.LogSink {
	c := s.l.With()
	for i := 0; i+1 < len(kv); i += 2 {
		c = c.Interface(fmt.Sprint(kv[i]), loggable(kv[i+1]))
	}
	return &zerologSink{l: c.Logger(), name: s.name}
}

func (s *zerologSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &zerologSink{l: s.l, name: name}
}

// loggable renders errors and Stringers as text: marshalled as JSON they would be empty objects.
func loggable(v any) any {
	switch x := v.(type) {
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	}
	return v
}
