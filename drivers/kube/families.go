package kube

import (
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// describedRegisterer registers on the registry and keeps what it registered, so the families
// the operator may export can be listed before any of them has a series: a counter vector with
// no child yet is in no scrape, but an alert or a dashboard may rightly name it.
type describedRegisterer struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *describedRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *describedRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.Registry.MustRegister(cs...)
	r.collectors = append(r.collectors, cs...)
}

// fqName is how a Desc prints its name; Desc has no getter for it.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Families names every metric family the operator exports, sorted: the check that the alerts
// and the dashboard under deploy/monitoring name only metrics that exist reads it. A histogram is
// named once, without its _bucket, _sum and _count series.
func (m *Metrics) Families() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range m.described.collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	seen := map[string]bool{}
	for d := range ch {
		if sub := fqName.FindStringSubmatch(d.String()); sub != nil {
			seen[sub[1]] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
