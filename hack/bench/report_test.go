package main

import (
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the report's golden files")

// hist is a histogram of the operator's buckets with the given cumulative counts.
func hist(counts ...float64) histogram {
	le := []float64{0.001, 0.01, 0.1, 1, 10, math.Inf(1)}
	return histogram{le: le[:len(counts)], count: counts, total: counts[len(counts)-1], sum: 1}
}

func durations(secs ...float64) []time.Duration {
	var out []time.Duration
	for _, s := range secs {
		out = append(out, time.Duration(s*float64(time.Second)))
	}
	return out
}

func fixedConfig() config {
	return config{fleets: 50, repeats: 3, memLevels: []int{50, 200}, restWindow: time.Minute, resync: 10 * time.Second,
		lifecycleFleets: 10, nodes: 12, coreCount: 5, coreBenchtime: "1s", scaleFleets: 2000, scaleMembers: 1, scaleWindow: 5 * time.Minute}
}

// scaleMissed is a scale phase that missed every target: memory, writes at rest and after the
// restart, by both counts.
func scaleMissed(req operatorRequests) *scaleResult {
	return &scaleResult{
		fleets: 2000, members: 1, window: 5 * time.Minute, resync: 10 * time.Minute, created: 250 * time.Second,
		settled: 95 * time.Second, quiet: true,
		base: &memLevel{fleets: 0, samples: []memSample{{30e6, 20e6, 70e6}, {31e6, 21e6, 71e6}, {29e6, 19e6, 69e6}},
			cached: []float64{1e6, 1e6, 1e6}, cachedInuse: []float64{1.5e6, 1.5e6, 1.5e6}},
		top: &memLevel{fleets: 2000, samples: []memSample{{330e6, 250e6, 420e6}, {335e6, 251e6, 421e6}, {329e6, 249e6, 419e6}},
			cached: []float64{81e6, 81e6, 81e6}, cachedInuse: []float64{101e6, 101e6, 101e6}},
		rest: &restResult{fleets: 2000, window: 5 * time.Minute, opWrites: 2,
			opSeries: map[string]float64{"resource=celldfleets/status,verb=patch": 2, "resource=events,verb=create": 0},
			api:      req, resyncAdds: 2000, syncs: 2000, cpu: 4.5},
		restart: &restartResult{fleets: 2000, ready: 3200 * time.Millisecond, decided: 41 * time.Second, window: 5 * time.Minute,
			opWrites: 12, opSeries: map[string]float64{"resource=celldfleets/status,verb=patch": 10, "resource=events,verb=create": 2},
			api: req, syncs: 2000, cpu: 21.3},
	}
}

// scaleMet is a scale phase at the long mode's scale that met every target.
func scaleMet() *scaleResult {
	s := scaleMissed(operatorRequests{writes: map[string]float64{"create": 0, "patch": 0}, reads: 12})
	s.top.samples = []memSample{{150e6, 120e6, 240e6}, {151e6, 121e6, 241e6}, {149e6, 119e6, 239e6}}
	s.rest.opWrites, s.rest.opSeries = 0, nil
	s.restart.opWrites, s.restart.opSeries = 0, nil
	return s
}

// everyFinding is a run in which every phase measured something and every target was missed:
// each row and note the report can write is in it.
func everyFinding(t *testing.T) *report {
	log := filepath.Join(t.TempDir(), "op.log")
	line := `{"level":"error","action":"Apply","error":"apply apply/StatefulSet/bench-overhead-0a1b2c/f0001: the object has been modified","message":"action failed; requeued"}` + "\n"
	if err := os.WriteFile(log, []byte(strings.Repeat(line, 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	spans := []logSpan{{path: log, from: 0, to: int64(3 * len(line))}}
	req := operatorRequests{writes: map[string]float64{"resource=celldfleets,verb=patch": 4}, reads: 30, celldReads: 10}
	return &report{
		cfg: fixedConfig(), started: time.Date(2026, 11, 29, 17, 16, 0, 0, time.UTC), took: 13*time.Minute + 8*time.Second,
		machine: "2 CPUs (test), 24 GiB memory",
		core: []*coreResult{
			{name: "StepConverged/PersistentFleet/members=3", decisions: []float64{2.1e6, 2.2e6, 2.0e6}, allocs: []float64{0, 0, 0}, bytes: []float64{0, 0, 0}},
			{name: "StepConverged/PersistentFleet/members=99", decisions: []float64{3.6e5, 3.7e5, 3.8e5}, allocs: []float64{0, 0, 0}, bytes: []float64{0, 0, 0}},
			{name: "Change/ScaleIn/members=6", decisions: []float64{9e4, 1e5, 1.1e5}, allocs: []float64{120, 120, 121}, bytes: []float64{9800, 9800, 9900}},
		},
		overhead: &overheadResult{
			op: durations(30, 32, 31), raw: durations(24, 25, 26),
			e2a: hist(0, 10, 50, 90, 100, 100), decision: hist(40, 100, 100, 100, 100, 100),
			queueWait: hist(0, 20, 80, 100, 100, 100), work: hist(0, 0, 30, 100, 100, 100),
			opWrites: []float64{20, 21, 22}, apiWrites: []float64{20, 21, 22}, apiReads: []float64{40, 41, 42}, celldReads: []float64{10, 11, 12},
			opSeries: map[string]float64{"resource=statefulsets,verb=apply": 6, "resource=celldfleets/status,verb=patch": 30},
			failed:   map[string]float64{"Apply": 3}, failLogs: spans, runs: 3,
			profiles: []string{"a.pprof", "b.pprof"}, profileErr: errors.New("pprof: one profile had no samples"),
			profileTop: "flat  flat%   sum%        cum   cum%\n0.50s 10.00% 10.00%      0.50s 10.00%  runtime.memmove",
			profileOwn: "flat  flat%   sum%        cum   cum%\n0.01s  0.20%  0.20%      2.00s 40.00%  github.com/celld/celld-operator/drivers/kube.(*Controller).Sync",
			profileCum: "Duration: 90s, Total samples = 5s ( 5.56%)\n" +
				"0.01s  0.20%  0.20%      2.00s 40.00%  github.com/celld/celld-operator/drivers/kube.(*Controller).Sync\n" +
				"0      0%     0.20%      0.10s  2.00%  github.com/celld/celld-operator/machine.(*Fleet).Step\n" +
				"0.30s  6.00%  6.20%      0.30s  6.00%  runtime.gcBgMarkWorker",
		},
		scaleIn: &scaleInResult{
			fleets: 50, total: 40 * time.Second, steps: []float64{5, 7, 11}, first: []float64{0.5, 1, 2},
			decision: hist(90, 100, 100, 100, 100, 100), e2a: hist(0, 0, 10, 60, 100, 100),
			queueWait: hist(0, 0, 10, 60, 100, 100), work: hist(0, 0, 5, 100, 100, 100),
			failed: map[string]float64{"PublishStatus": 5},
			traced: []stepBreakdown{
				{stepSample: stepSample{fleet: "f0003", replicas: 4, rolled: time.Unix(100, 0), seen: time.Unix(111, 0)}, traced: true, hasEvent: true,
					informer: 0.01, queue: 9, decide: 0.0003, before: 1.2, fresh: 0.3, write: 0.48, limiter: 0.2, watch: 0.0097},
				{stepSample: stepSample{fleet: "f0009", replicas: 3, rolled: time.Unix(100, 0), seen: time.Unix(107, 0)}, traced: true,
					queue: 6.5, decide: 0.0004, before: 0.2, fresh: 0.1, write: 0.1996},
				{stepSample: stepSample{fleet: "f0001", replicas: 3, rolled: time.Unix(100, 0), seen: time.Unix(105, 0)}},
			},
			writes: map[string]float64{"resource=celldfleets/status,verb=patch": 400, "resource=statefulsets,verb=apply": 1500},
			api:    req,
		},
		steady: &steadyResult{
			levels: []memLevel{
				{fleets: 50, samples: []memSample{{20e6, 15e6, 60e6}}, cached: []float64{2e6}, cachedInuse: []float64{3e6}},
				{fleets: 200, samples: []memSample{{60e6, 45e6, 120e6}}, cached: []float64{8e6}, cachedInuse: []float64{11e6}},
			},
			rest: &restResult{fleets: 200, window: time.Minute, opWrites: 3, opSeries: map[string]float64{"resource=celldfleets/status,verb=patch": 3},
				api: req, resyncAdds: 1200, syncs: 1200},
			lifecycle: &lifecycleResult{fleets: 10, opWrites: 930, opSeries: map[string]float64{"resource=celldfleets/status,verb=patch": 528, "resource=events,verb=create": 110},
				failed: map[string]float64{"AppendHistory": 2}, failLogs: spans, api: req},
		},
		scale:       scaleMissed(req),
		terminating: 7,
	}
}

// everyFailure is a run in which every phase failed.
func everyFailure() *report {
	boom := func(what string) error { return errors.New(what + ": context deadline exceeded\nafter 5m0s") }
	return &report{
		cfg: fixedConfig(), started: time.Date(2026, 11, 29, 17, 16, 0, 0, time.UTC), took: time.Minute, machine: "2 CPUs (test)",
		coreErr: boom("core"), clusterErr: boom("cluster/up.sh"), overheadErr: boom("overhead"), scaleInErr: boom("scale-in"),
		steadyErr: boom("steady"),
		steady:    &steadyResult{rest: &restResult{fleets: 10, window: time.Minute, apiErr: boom("scrape")}},
		// The scale phase failed at the restart: what it measured before is reported, and the API
		// server's count it could not read.
		scaleErr: boom("restart: 1200 of 2000 fleets decided"),
		scale: &scaleResult{fleets: 2000, members: 1, window: 5 * time.Minute, resync: 10 * time.Minute, created: 250 * time.Second,
			rest: &restResult{fleets: 2000, window: 5 * time.Minute, apiErr: boom("scrape"), cpu: 3}},
	}
}

// TestReportGolden: the report's table and notes for a run with every finding and for one with
// every phase failed, against testdata/*.md (go test ./hack/bench -update rewrites them).
func TestReportGolden(t *testing.T) {
	unlimited := everyFinding(t)
	unlimited.overhead.movingUnlimited, unlimited.scaleIn.movingUnlimited = true, true
	// The long mode: its own section, its headings a level down, and the scale phase's targets met.
	long := everyFinding(t)
	long.cfg.fleets, long.cfg.memLevels, long.scale = 500, []int{0, 100, 500}, scaleMet()
	for name, r := range map[string]*report{"every-finding": everyFinding(t), "every-failure": everyFailure(), "moving-unlimited": unlimited,
		"long-mode": long} {
		t.Run(name, func(t *testing.T) {
			got := r.markdown()
			path := filepath.Join("testdata", name+".md")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./hack/bench -run TestReportGolden -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("report differs from %s; rerun with -update once the change is intended\n%s", path, firstDiff(string(want), got))
			}
		})
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\nwant: " + a + "\ngot:  " + b
		}
	}
	return ""
}

func TestStepTargetByFleetCount(t *testing.T) {
	cases := []struct {
		fleets  int
		p99     float64
		verdict string
	}{
		{50, 0.5, "met"}, {50, 1, "met"}, {50, 1.001, "missed: p99 1.00 s"}, {50, math.NaN(), "missed: p99 n/a"},
		{500, 3, "met"}, {500, 3.2, "missed: p99 3.20 s"}, {100, 30, ""}, {5, 0.1, ""},
	}
	for _, c := range cases {
		target, verdict := stepTarget(c.fleets, c.p99)
		if verdict != c.verdict {
			t.Errorf("stepTarget(%d, %v) verdict = %q, want %q", c.fleets, c.p99, verdict, c.verdict)
		}
		if (c.verdict == "") != (target == "(no target)") {
			t.Errorf("stepTarget(%d, %v) target = %q with verdict %q", c.fleets, c.p99, target, verdict)
		}
	}
}
