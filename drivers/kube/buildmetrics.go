package kube

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// SetBuild labels celld_operator_build_info with the version and commit the binary was stamped
// with at link time. Empty values fall back to what the Go toolchain recorded in the binary (the
// module version, and the VCS revision of a build from a checkout), then to "unknown", so the
// series always exists: "operator down" alerts on its absence.
func (m *Metrics) SetBuild(version, commit string) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && commit == "" {
				commit = s.Value
			}
		}
	}
	if version == "" {
		version = "unknown"
	}
	if commit == "" {
		commit = "unknown"
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, commit, runtime.Version()).Set(1)
}

// leaderGauge is 1 while this replica may write (it holds the lease, or runs without leader
// election) and 0 while it stands by: summed over the replicas, 0 means no one works.
type leaderGauge struct {
	desc *prometheus.Desc
	lead atomic.Pointer[Leadership]
	// watched says whether watch was called: a Metrics no controller ever used reports no leader.
	watched atomic.Bool
}

func newLeaderGauge() *leaderGauge {
	return &leaderGauge{desc: prometheus.NewDesc(metricsNamespace+"_leader",
		"1 while this replica leads (holds the leader election lease, or runs without leader election), 0 while it stands by.", nil, nil)}
}

// watch makes the gauge follow l; a nil l (no leader election) always leads.
func (g *leaderGauge) watch(l *Leadership) {
	g.lead.Store(l)
	g.watched.Store(true)
}

func (g *leaderGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *leaderGauge) Collect(ch chan<- prometheus.Metric) {
	v := 0.0
	if g.watched.Load() && g.lead.Load().Leading() {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
}
