package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/kube"
	"github.com/celld/celld-operator/e2e/testenv"
)

// --- 8. at rest at scale, and a restart ----------------------------------------------------------

type scaleResult struct {
	fleets, members int
	profile         string
	window          time.Duration
	resync          time.Duration // the operator's default --resync-period, which this phase runs
	created         time.Duration // first create to the last fleet seen converged
	settled         time.Duration // the last fleet seen converged to the operator's last write before rest
	quiet           bool          // its writes went quiet after the fleets converged: settled is measured
	base, top       *memLevel     // at 0 fleets and at all of them, converged
	rest            *restResult
	restart         *restartResult
}

// restartResult is what a second operator does when it starts on fleets that are all converged.
type restartResult struct {
	fleets  int
	ready   time.Duration // from its start to /readyz: its caches synced
	decided time.Duration // from its start to every fleet decided once (celld_operator_fleets)
	// window is from its start to the scrape that closed the count of its first writes: the
	// phase's window, or longer if deciding every fleet took longer than that.
	window   time.Duration
	opWrites float64
	opSeries map[string]float64
	api      operatorRequests
	apiErr   error
	syncs    float64
	cpu      float64 // its CPU seconds since it started
}

// scale runs one operator with its default flags (the production --resync-period) in a namespace
// of its own: its memory at 0 fleets, then with cfg.scaleFleets fleets created at once and
// converged, what it does at rest over cfg.scaleWindow, and then what a second operator started
// in its place does: how long until its caches synced and every fleet is decided, and what it
// writes in its first cfg.scaleWindow. It returns what it measured up to a failure.
func (b *bench) scale(ctx context.Context) (*scaleResult, error) {
	n, window := b.cfg.scaleFleets, b.cfg.scaleWindow
	res := &scaleResult{fleets: n, members: b.cfg.scaleMembers, profile: b.cfg.scaleProfile, window: window, resync: kube.DefaultResync}
	ns, err := b.createNamespace(ctx, "bench-scale")
	if err != nil {
		return nil, err
	}
	ph, err := b.startPhase(ctx, "scale", ns, false)
	if err != nil {
		return nil, err
	}
	defer ph.close()
	op, fl := ph.op, ph.fl

	if err := b.quiet(ctx, op, 5*time.Second); err != nil {
		return nil, err
	}
	base, err := b.memLevel(ctx, op, ns, 0)
	if err != nil {
		return nil, err
	}
	res.base = &base
	b.logf("scale: 0 fleets: heap live %s, RSS %s, cached objects ~%s", bytesStr(med(base.samples, heapAlloc)),
		bytesStr(med(base.samples, rss)), bytesStr(median(base.cached)))

	b.logf("scale: creating %d %s fleets of %d at once", n, res.profile, res.members)
	start := time.Now()
	if err := b.createFleetsOf(ctx, ns, 0, n, int32(res.members), v1alpha1.Profile(res.profile)); err != nil {
		return res, err
	}
	last, err := fl.wait(ctx, n, runTimeout(n))
	if err != nil {
		return res, fmt.Errorf("fleets not converged (operator log %s): %w", op.LogPath, err)
	}
	res.created = last.Sub(start)
	b.logf("scale: %d fleets converged in %s", n, res.created.Round(time.Millisecond))

	// Converged is not yet at rest: a fleet's status may still wait on its workload's status.
	// Creation's bound applies, since the wait grows with the fleets kube-controller-manager has
	// to catch up on.
	settled, err := b.quietWithin(ctx, op, 5*time.Second, runTimeout(n))
	if err != nil {
		return res, err
	}
	res.settled, res.quiet = max(settled.Sub(last), 0), true
	b.logf("scale: the operator's last write %s after the last fleet converged", res.settled.Round(time.Millisecond))
	top, err := b.memLevel(ctx, op, ns, n)
	if err != nil {
		return res, err
	}
	res.top = &top
	b.logf("scale: %d fleets: heap live %s, RSS %s, cached objects ~%s", n, bytesStr(med(top.samples, heapAlloc)),
		bytesStr(med(top.samples, rss)), bytesStr(median(top.cached)))

	b.logf("scale: at rest: %d converged fleets, %s window, default resync (%s)", n, window, res.resync)
	if res.rest, err = b.atRest(ctx, op, n, window); err != nil {
		return res, err
	}
	b.logf("scale: at rest: %s writes, %s syncs, %.2f CPU seconds", trim(res.rest.opWrites), trim(res.rest.syncs), res.rest.cpu)

	b.logf("scale: restarting the operator")
	op.stop()
	if res.restart, err = b.restart(ctx, ns, n, window); err != nil {
		return res, err
	}
	r := res.restart
	b.logf("scale: restart: caches synced after %s, every fleet decided after %s; %s writes in its first %s",
		r.ready.Round(time.Millisecond), r.decided.Round(time.Millisecond), trim(r.opWrites), r.window.Round(time.Second))
	// Nothing runs after this phase: the namespace is left to the control plane, which stops next.
	return res, nil
}

// restart starts an operator with its default flags on n converged fleets and times it from its
// start: to /readyz, and to every fleet decided once (the sum of celld_operator_fleets over
// states, which counts the fleets its workers decided since it started). Then it counts its
// writes, by its counter and the API server's, over its first window.
func (b *bench) restart(ctx context.Context, ns string, n int, window time.Duration) (*restartResult, error) {
	r := &restartResult{fleets: n}
	api0, apiErr := b.cl.operatorRequests(ctx)
	t0 := time.Now()
	op, err := b.startOperator(ctx, "scale-restart", ns)
	if err != nil {
		return nil, err
	}
	defer op.stop()
	r.ready = time.Since(t0)

	decided, timeout := 0.0, runTimeout(n)
	var scrapeErr error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		m, err := op.scrape()
		if err != nil {
			scrapeErr = err
			return false, nil
		}
		decided = m.value("celld_operator_fleets")
		return decided >= float64(n), nil
	})
	if err != nil {
		if scrapeErr != nil {
			err = fmt.Errorf("%w (last scrape: %v)", err, scrapeErr)
		}
		return nil, fmt.Errorf("restart: %s of %d fleets decided within %s (operator log %s): %w", trim(decided), n, timeout, op.LogPath, err)
	}
	r.decided = time.Since(t0)

	select {
	case <-time.After(time.Until(t0.Add(window))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m, err := op.scrape()
	if err != nil {
		return nil, err
	}
	r.window = time.Since(t0)
	api1, err := b.cl.operatorRequests(ctx)
	if apiErr == nil {
		apiErr = err
	}
	r.apiErr = apiErr
	if apiErr == nil {
		r.api = api1.sub(api0)
	}
	// The process started with the window: its counters are the window's.
	r.opWrites = m.value("celld_operator_api_writes_total")
	r.opSeries = testenv.Delta(m.series("celld_operator_api_writes_total"), nil)
	r.syncs = m.histogram("workqueue_work_duration_seconds").total
	r.cpu = m.value("process_cpu_seconds_total")
	return r, nil
}

// section is what the phase puts in the report: rows numbered 8, for what it measured.
func (s *scaleResult) section() section {
	var sec section
	fleets := fleetsOf(s.fleets, s.members)
	if s.profile != "" && s.profile != string(v1alpha1.ProfilePersistentFleet) {
		fleets += " (" + s.profile + ")"
	}
	if s.created > 0 {
		sec.add("8", fmt.Sprintf("scale: %s created at once through the operator (default flags), until all converged", fleets),
			fmt.Sprintf("%s (%.1f fleets/s)", durStr(s.created.Seconds()), float64(s.fleets)/s.created.Seconds()), "", "")
	}
	if s.quiet {
		sec.add("8", "scale: from the last fleet converged to the operator's last write before rest (its writes then quiet for 5 s)",
			durStr(s.settled.Seconds()), "", "")
	}
	for _, l := range []*memLevel{s.base, s.top} {
		if l != nil {
			sec.add("8", fmt.Sprintf("scale: memory, %s (after a forced GC; median of 3)", fleetsOf(l.fleets, s.members)), memLevelText(*l), "", "")
		}
	}
	if s.base != nil && s.top != nil && s.top.fleets > s.base.fleets {
		measured, v := memPerFleet(*s.base, *s.top)
		sec.add("8", fmt.Sprintf("scale: memory per fleet, %d -> %d fleets", s.base.fleets, s.top.fleets), measured, memTarget, v)
	}
	if rest := s.rest; rest != nil {
		sec.add("8", fmt.Sprintf("scale: writes at rest, operator's counter: %d converged fleets, %s window", rest.fleets, rest.window),
			fmt.Sprintf("%s writes; %s fleets re-enqueued and %s syncs in the window (default resync every %s)",
				trim(rest.opWrites), trim(rest.resyncAdds), trim(rest.syncs), s.resync), "0", zeroVerdict(rest.opWrites, rest.opSeries))
		apiRow(&sec, fmt.Sprintf("scale: writes at rest, API server side: %d converged fleets, %s window", rest.fleets, rest.window), rest.api, rest.apiErr)
		sec.add("8", fmt.Sprintf("scale: CPU at rest, %d converged fleets (process_cpu_seconds_total)", rest.fleets),
			fmt.Sprintf("%s CPU seconds per hour (%.2f s in the %s window, %.2f%% of one core)",
				trim(rest.cpu*float64(time.Hour)/float64(rest.window)), rest.cpu, rest.window, 100*rest.cpu/rest.window.Seconds()), "(no target)", "")
		if rest.syncs < float64(rest.fleets) {
			sec.note("**Scale: the window at rest held %s syncs for %d fleets.** The operator's default --resync-period (%s) "+
				"is longer than the %s window, which may then hold no resync at all: its writes at rest are those of an "+
				"operator with nothing to sync. The restart syncs every fleet at once, which is where what a resync writes "+
				"would show (the rows after it); phase 4 counts writes at rest through resyncs with a short --resync-period.",
				trim(rest.syncs), rest.fleets, s.resync, rest.window)
		}
	}
	if r := s.restart; r != nil {
		sec.add("8", fmt.Sprintf("scale: operator restarted on %d converged fleets: from its start to caches synced (/readyz), and to every fleet decided (celld_operator_fleets)", r.fleets),
			fmt.Sprintf("caches synced %s; every fleet decided %s", durStr(r.ready.Seconds()), durStr(r.decided.Seconds())), "(no target)", "")
		what := fmt.Sprintf("the first %s after the restart", r.window.Round(time.Second))
		sec.add("8", "scale: writes in "+what+", operator's counter",
			fmt.Sprintf("%s writes; %s syncs; %.2f CPU seconds (%.2f%% of one core)", trim(r.opWrites), trim(r.syncs), r.cpu, 100*r.cpu/r.window.Seconds()),
			"0", zeroVerdict(r.opWrites, r.opSeries))
		apiRow(&sec, "scale: writes in "+what+", API server side", r.api, r.apiErr)
	}
	return sec
}

// fleetsOf is "n fleets of m member(s)".
func fleetsOf(n, members int) string {
	if members == 1 {
		return fmt.Sprintf("%d fleets of 1 member", n)
	}
	return fmt.Sprintf("%d fleets of %d members", n, members)
}

// zeroVerdict is the verdict on a target of 0 writes, with the writes that missed it.
func zeroVerdict(writes float64, series map[string]float64) string {
	if writes == 0 {
		return "met"
	}
	return "missed: " + seriesText(nonZero(series))
}

// apiRow is the API server's count of the operator's writes against a target of 0.
func apiRow(sec *section, what string, api operatorRequests, err error) {
	if err != nil {
		sec.add("8", what, "n/a: "+oneLine(err.Error()), "0", "not measured")
		return
	}
	w := api.totalWrites()
	sec.add("8", what, fmt.Sprintf("%s writes; %s other requests (watches, discovery)", trim(w), trim(api.reads)), "0", zeroVerdict(w, api.writes))
}

func nonZero(s map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range s {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
