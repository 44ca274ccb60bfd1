package main

import (
	"io"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/celld/celld-operator/e2e/testenv"
)

type sample struct {
	labels map[string]string
	value  float64
}

// families are the samples of one scrape by metric name (a histogram's _bucket, _sum and _count
// series under their own names, as the text format writes them).
type families map[string][]sample

func parseProm(r io.Reader) (families, error) {
	ms, err := testenv.ParseMetrics(r)
	if err != nil {
		return nil, err
	}
	return fromMetrics(ms), nil
}

// fromMetrics flattens parsed families into samples by series name.
func fromMetrics(ms testenv.Metrics) families {
	out := families{}
	for name, f := range ms {
		for _, m := range f.Metric {
			labels := testenv.Labels(m)
			with := func(k, v string) map[string]string {
				l := maps.Clone(labels)
				l[k] = v
				return l
			}
			switch {
			case m.Histogram != nil:
				h := m.Histogram
				for _, b := range h.Bucket {
					out[name+"_bucket"] = append(out[name+"_bucket"], sample{with("le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), float64(b.GetCumulativeCount())})
				}
				out[name+"_sum"] = append(out[name+"_sum"], sample{labels, h.GetSampleSum()})
				out[name+"_count"] = append(out[name+"_count"], sample{labels, float64(h.GetSampleCount())})
			case m.Summary != nil:
				q := m.Summary
				for _, x := range q.Quantile {
					out[name] = append(out[name], sample{with("quantile", strconv.FormatFloat(x.GetQuantile(), 'g', -1, 64)), x.GetValue()})
				}
				out[name+"_sum"] = append(out[name+"_sum"], sample{labels, q.GetSampleSum()})
				out[name+"_count"] = append(out[name+"_count"], sample{labels, float64(q.GetSampleCount())})
			default:
				out[name] = append(out[name], sample{labels, testenv.Value(m)})
			}
		}
	}
	return out
}

// sum adds the samples of name whose labels include match.
func (f families) sum(name string, match map[string]string) float64 {
	t := 0.0
next:
	for _, s := range f[name] {
		for k, v := range match {
			if s.labels[k] != v {
				continue next
			}
		}
		t += s.value
	}
	return t
}

func (f families) value(name string) float64 { return f.sum(name, nil) }

// series is every sample of name keyed by its labels, rendered "k=v,k=v" without the ones in drop.
func (f families) series(name string, drop ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range f[name] {
		var keys []string
	label:
		for k := range s.labels {
			for _, d := range drop {
				if k == d {
					continue label
				}
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+"="+s.labels[k])
		}
		out[strings.Join(parts, ",")] += s.value
	}
	return out
}

// histogram is a cumulative Prometheus histogram: upper bounds and counts at or below each.
type histogram struct {
	le    []float64
	count []float64
	sum   float64
	total float64
}

func (f families) histogram(name string) histogram {
	var h histogram
	type b struct{ le, n float64 }
	var bs []b
	for _, s := range f[name+"_bucket"] {
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			continue
		}
		bs = append(bs, b{le, s.value})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	for _, x := range bs {
		h.le = append(h.le, x.le)
		h.count = append(h.count, x.n)
	}
	h.sum = f.value(name + "_sum")
	h.total = f.value(name + "_count")
	return h
}

// add sums two histograms of the same buckets (scrapes of separate processes).
func (h histogram) add(o histogram) histogram {
	if len(h.le) == 0 {
		return o
	}
	if len(o.le) == 0 {
		return h
	}
	out := histogram{le: h.le, count: make([]float64, len(h.count)), sum: h.sum + o.sum, total: h.total + o.total}
	for i := range h.count {
		out.count[i] = h.count[i]
		if i < len(o.count) {
			out.count[i] += o.count[i]
		}
	}
	return out
}

// sub is h minus an earlier scrape of the same process.
func (h histogram) sub(o histogram) histogram {
	if len(o.le) == 0 {
		return h
	}
	out := histogram{le: h.le, count: make([]float64, len(h.count)), sum: h.sum - o.sum, total: h.total - o.total}
	for i := range h.count {
		out.count[i] = h.count[i]
		if i < len(o.count) {
			out.count[i] -= o.count[i]
		}
	}
	return out
}

// quantile interpolates linearly inside the bucket that holds the q-th observation, as
// Prometheus' histogram_quantile does: the answer is only as precise as the buckets are narrow.
// It also returns that bucket's bounds.
func (h histogram) quantile(q float64) (v, lo, hi float64) {
	if h.total == 0 || len(h.le) == 0 {
		return math.NaN(), 0, 0
	}
	rank := q * h.total
	prevLe, prevN := 0.0, 0.0
	for i, le := range h.le {
		n := h.count[i]
		if n >= rank {
			if math.IsInf(le, 1) {
				// Beyond the last finite bound: all that can be said is "above it".
				return prevLe, prevLe, le
			}
			if n == prevN {
				return le, prevLe, le
			}
			return prevLe + (le-prevLe)*(rank-prevN)/(n-prevN), prevLe, le
		}
		prevLe, prevN = le, n
	}
	return prevLe, prevLe, math.Inf(1)
}
