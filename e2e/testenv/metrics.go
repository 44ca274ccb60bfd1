package testenv

import (
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are one scrape's metric families by name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics reads the Prometheus text format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Metrics(fams), nil
}

// Value is a counter's, gauge's or untyped metric's value.
func Value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Labels is a metric's labels by name.
func Labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.Label))
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Series sums a counter or gauge over its series: the total, and each series keyed by its
// labels as the text format writes them ({a="x",b="y"}; "" for none).
func (ms Metrics) Series(name string) (float64, map[string]float64) {
	total, out := 0.0, map[string]float64{}
	f := ms[name]
	if f == nil {
		return 0, out
	}
	for _, m := range f.Metric {
		v := Value(m)
		total += v
		out[LabelText(m)] += v
	}
	return total, out
}

// LabelText writes a metric's labels as the text format does, sorted by name.
func LabelText(m *dto.Metric) string {
	if len(m.Label) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m.Label))
	for _, l := range m.Label {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// Delta is what changed between two readings of the same series: now minus before, without the
// series that did not move.
func Delta(now, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}
