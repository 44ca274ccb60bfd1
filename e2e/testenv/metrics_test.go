package testenv

import (
	"strings"
	"testing"
)

const scrape = `# HELP celld_operator_heals_total Members replaced.
# TYPE celld_operator_heals_total counter
celld_operator_heals_total{reason="NodeGone"} 2
celld_operator_heals_total{reason="VolumeLost"} 1
# TYPE celld_operator_fleets gauge
celld_operator_fleets 3
# TYPE celld_operator_sync_seconds histogram
celld_operator_sync_seconds_bucket{le="0.1"} 4
celld_operator_sync_seconds_bucket{le="+Inf"} 5
celld_operator_sync_seconds_sum 0.7
celld_operator_sync_seconds_count 5
`

func TestSeriesSumsACounterByLabels(t *testing.T) {
	ms, err := ParseMetrics(strings.NewReader(scrape))
	if err != nil {
		t.Fatal(err)
	}
	total, by := ms.Series("celld_operator_heals_total")
	if total != 3 || by[`{reason="NodeGone"}`] != 2 || by[`{reason="VolumeLost"}`] != 1 || len(by) != 2 {
		t.Errorf("heals: %g %v", total, by)
	}
	if total, by := ms.Series("celld_operator_fleets"); total != 3 || by[""] != 3 {
		t.Errorf("gauge: %g %v", total, by)
	}
	if total, by := ms.Series("absent"); total != 0 || len(by) != 0 {
		t.Errorf("absent metric: %g %v", total, by)
	}
	if h := ms["celld_operator_sync_seconds"].Metric[0].Histogram; h.GetSampleCount() != 5 || len(h.Bucket) != 2 {
		t.Errorf("histogram: %v", h)
	}
}

func TestMalformedTextIsAnError(t *testing.T) {
	if _, err := ParseMetrics(strings.NewReader("celld_operator_fleets{ 3\n")); err == nil {
		t.Error("a malformed line must be an error")
	}
}

func TestDeltaKeepsWhatMoved(t *testing.T) {
	d := Delta(map[string]float64{"a": 3, "b": 2, "c": 1}, map[string]float64{"a": 1, "b": 2})
	if len(d) != 2 || d["a"] != 2 || d["c"] != 1 {
		t.Errorf("delta %v", d)
	}
}
