package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// --- 2. overhead against the floor ---------------------------------------------------------------

type overheadResult struct {
	op, raw                []time.Duration
	e2a, decision          histogram
	queueWait, work        histogram
	opWrites, apiWrites    []float64          // per fleet, per operator run
	apiReads, celldReads   []float64          // per fleet, per operator run
	opSeries               map[string]float64 // writes per fleet by verb and resource, summed over runs
	failed                 map[string]float64 // failed actions per fleet by kind, summed over runs
	failLogs               []logSpan          // the operator logs' lines of the measured windows
	runs                   int
	profiles               []string
	profileTop, profileCum string
	profileOwn             string
	profileErr             error
	// movingUnlimited: the operator ran the client that moves fleets without a limiter.
	movingUnlimited bool
}

// overhead alternates operator and raw runs of n fleets, after one small warm-up run of each
// that is not counted (the first objects of a kind a fresh API server and controllers see cost
// more than the rest).
func (b *bench) overhead(ctx context.Context) (*overheadResult, error) {
	n := b.cfg.fleets
	res := &overheadResult{}
	warm := min(n, 5)
	b.logf("overhead: warm-up, %d fleets each way (not counted)", warm)
	if _, err := b.rawRun(ctx, "warm", warm); err != nil {
		return nil, fmt.Errorf("warm-up raw run: %w", err)
	}
	if _, err := b.operatorRun(ctx, "warm", warm, nil); err != nil {
		return nil, fmt.Errorf("warm-up operator run: %w", err)
	}
	for r := 1; r <= b.cfg.repeats; r++ {
		b.logf("overhead: operator run %d/%d, %d fleets", r, b.cfg.repeats, n)
		d, err := b.operatorRun(ctx, fmt.Sprintf("op%d", r), n, res)
		if err != nil {
			return nil, fmt.Errorf("operator run %d: %w", r, err)
		}
		res.op = append(res.op, d)
		b.logf("overhead: operator run %d: %s", r, d.Round(time.Millisecond))

		b.logf("overhead: raw run %d/%d, %d StatefulSets with their Services, NetworkPolicies and PDB", r, b.cfg.repeats, n)
		d, err = b.rawRun(ctx, fmt.Sprintf("raw%d", r), n)
		if err != nil {
			return nil, fmt.Errorf("raw run %d: %w", r, err)
		}
		res.raw = append(res.raw, d)
		b.logf("overhead: raw run %d: %s", r, d.Round(time.Millisecond))
	}
	if len(res.profiles) > 0 {
		res.profileTop, res.profileErr = pprofTop(b.root, res.profiles, "-nodecount=25")
		if res.profileErr == nil {
			res.profileOwn, res.profileErr = pprofTop(b.root, res.profiles, "-cum", "-nodecount=20", "-show=celld/celld-operator")
		}
		if res.profileErr == nil {
			res.profileCum, res.profileErr = pprofTop(b.root, res.profiles, "-cum", "-nodecount=400")
		}
	}
	return res, nil
}

// operatorRun: an operator started (and its caches synced) before the clock starts; n fleets
// created at once; the clock stops when the last one is converged. res, when given, collects the
// operator's histograms, write counts and CPU profile of the run.
func (b *bench) operatorRun(ctx context.Context, name string, n int, res *overheadResult) (time.Duration, error) {
	ns, err := b.createNamespace(ctx, "bench-"+name)
	if err != nil {
		return 0, err
	}
	op, err := b.startOperator(ctx, "overhead-"+name, ns)
	if err != nil {
		return 0, err
	}
	defer op.stop()
	w, err := b.watch(ctx, ns, false)
	if err != nil {
		return 0, err
	}
	defer w.close()
	fl, err := newFinishLine(w.fleets, fleetConverged)
	if err != nil {
		return 0, err
	}
	api0, apiErr := b.cl.operatorRequests(ctx)
	logFrom := op.LogOffset()
	if res != nil {
		res.movingUnlimited = op.movingUnlimited()
	}
	var prof *profiler
	if res != nil {
		prof = op.profile(filepath.Join(b.cfg.workDir, "profiles"), "overhead-"+name)
	}

	start := time.Now()
	if err := b.createFleets(ctx, ns, 0, n, 3); err != nil {
		return 0, err
	}
	last, err := fl.wait(ctx, n, runTimeout(n))
	if prof != nil {
		files, perr := prof.finish()
		res.profiles = append(res.profiles, files...)
		if perr != nil {
			res.profileErr = perr
		}
	}
	if err != nil {
		return 0, fmt.Errorf("fleets not converged (operator log %s): %w", op.LogPath, err)
	}
	d := last.Sub(start)

	if res != nil {
		m, err := op.scrape()
		if err != nil {
			return 0, err
		}
		res.runs++
		res.e2a = res.e2a.add(m.histogram("celld_operator_event_to_action_seconds"))
		res.decision = res.decision.add(m.histogram("celld_operator_decision_duration_seconds"))
		res.queueWait = res.queueWait.add(m.histogram("workqueue_queue_duration_seconds"))
		res.work = res.work.add(m.histogram("workqueue_work_duration_seconds"))
		res.opWrites = append(res.opWrites, m.value("celld_operator_api_writes_total")/float64(n))
		res.opSeries = addSeries(res.opSeries, m.series("celld_operator_api_writes_total"), float64(n))
		res.failed = addSeries(res.failed, failedActions(m), float64(n))
		res.failLogs = append(res.failLogs, logSpan{op.LogPath, logFrom, op.LogOffset()})
		if apiErr == nil {
			if api1, err := b.cl.operatorRequests(ctx); err == nil {
				d := api1.sub(api0)
				res.apiWrites = append(res.apiWrites, d.totalWrites()/float64(n))
				res.apiReads = append(res.apiReads, d.reads/float64(n))
				res.celldReads = append(res.celldReads, d.celldReads/float64(n))
			}
		}
	}
	// The operator stays up while the namespace goes: the fleets' finalizers need it.
	if err := b.deleteNamespace(ctx, ns, runTimeout(n)); err != nil {
		return 0, err
	}
	return d, nil
}

// rawRun: no operator; the same objects the operator would apply for n fleets, created at once by
// the bench itself; the clock stops when the last StatefulSet has every replica ready.
func (b *bench) rawRun(ctx context.Context, name string, n int) (time.Duration, error) {
	ns, err := b.createNamespace(ctx, "bench-"+name)
	if err != nil {
		return 0, err
	}
	objs, err := b.rawObjects(ctx, ns, n, 3)
	if err != nil {
		return 0, err
	}
	w, err := b.watch(ctx, ns, false)
	if err != nil {
		return 0, err
	}
	defer w.close()
	fl, err := newFinishLine(w.sts, stsReady)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := b.createRaw(ctx, ns, objs); err != nil {
		return 0, err
	}
	last, err := fl.wait(ctx, n, runTimeout(n))
	if err != nil {
		return 0, fmt.Errorf("StatefulSets not ready: %w", err)
	}
	d := last.Sub(start)
	if err := b.deleteNamespace(ctx, ns, runTimeout(n)); err != nil {
		return 0, err
	}
	return d, nil
}

// section is what the overhead runs put in the report, for n fleets a run.
func (o *overheadResult) section(n int) section {
	var sec section
	if len(o.op) == 0 || len(o.raw) == 0 {
		return sec
	}
	opS, rawS := seconds(o.op), seconds(o.raw)
	sec.add("2", fmt.Sprintf("overhead: %d fleets of 3 created at once through the operator, until all Ready", n),
		spread(opS, "s")+runsText(opS), "", "")
	sec.add("2", fmt.Sprintf("overhead: the same %d StatefulSets (+ their 2 Services, 2 NetworkPolicies, PDB) created directly, no operator, until all replicas ready", n),
		spread(rawS, "s")+runsText(rawS), "", "")
	ratio := median(opS) / median(rawS)
	v := "met"
	if ratio > 1.10 {
		v = fmt.Sprintf("missed by %.0f%% (%.2f over 1.10)", (ratio/1.10-1)*100, ratio-1.10)
	}
	sec.add("2", "overhead: ratio of the medians, operator / raw", fmt.Sprintf("%.2f (min/max across pairs %.2f-%.2f)", ratio, minOf(opS)/maxOf(rawS), maxOf(opS)/minOf(rawS)), "≤ 1.10", v)
	if len(o.opWrites) > 0 {
		api := "n/a"
		if len(o.apiWrites) > 0 {
			api = fmt.Sprintf("%s writes and %s other requests", trim(median(o.apiWrites)), trim(median(o.apiReads)))
		}
		sec.add("2", "overhead: the operator's requests per fleet, create to Ready (median of the runs)",
			fmt.Sprintf("%s writes by its counter; API server, its user: %s; by kind: %s", trim(median(o.opWrites)), api,
				seriesPer(o.opSeries, float64(o.runs))), "", "")
	}
	if f := sumSeries(o.failed) / float64(max(o.runs, 1)); f > 0 {
		sec.add("2", "overhead: the operator's failed actions per fleet (retried)", fmt.Sprintf("%s: %s", trim(f), kindsPer(o.failed, float64(o.runs))), "", "")
	}
	if o.queueWait.total > 0 {
		sec.add("2", "overhead: the operator's workqueue, wait in queue / sync duration (runs pooled)",
			fmt.Sprintf("wait p50 %s, p99 %s; sync p50 %s, p99 %s (%d syncs)", q(o.queueWait, 0.5), q(o.queueWait, 0.99),
				q(o.work, 0.5), q(o.work, 0.99), int(o.work.total)), "(no target)", "")
	}
	if ratio > 1.10 && len(o.opWrites) > 0 {
		moving, status, events := byClient(o.opSeries, float64(max(o.runs, 1)))
		reads := 0.0
		if len(o.apiReads) > 0 {
			reads = median(o.apiReads)
		}
		floorOf := func(w float64) float64 { return max(0, float64(n)*w-operatorBurst) / operatorQPS }
		floor := max(floorOf(moving+reads), floorOf(status), floorOf(events))
		movingLimit := "limited to %g QPS, burst %g (the --kube-api-qps/--kube-api-burst defaults)"
		if o.movingUnlimited {
			// Under priority and fairness the client that moves fleets has no bucket to wait at.
			floor = max(floorOf(status), floorOf(events))
			movingLimit = "limited to %g QPS, burst %g (the --kube-api-qps/--kube-api-burst defaults) but for the client that moves fleets, which ran without a limit"
		}
		movingLimit = fmt.Sprintf(movingLimit, operatorQPS, operatorBurst)
		bound := "so at this size the limiter is not what bounds the run"
		if floor >= 0.5*median(opS) {
			bound = "so the limiter alone accounts for most of the operator run"
		}
		lo, hi := minOf(opS)/maxOf(rawS), maxOf(opS)/minOf(rawS)
		noise := fmt.Sprintf("every pairing of runs misses (ratios %.2f-%.2f)", lo, hi)
		if lo <= 1.10 {
			noise = fmt.Sprintf("the ratios of single runs range %.2f-%.2f, so the miss is within this machine's noise", lo, hi)
		}
		sec.note("**Overhead target missed** (ratio %.2f: %.1f s against %.1f s; %s). The raw path creates the 6 objects of a "+
			"fleet from an unthrottled client and kube-controller-manager brings the members up. The operator path does the "+
			"same controller work, but its own requests come first and last: per fleet the reservation, the finalizer, the 6 "+
			"applies, a second StatefulSet apply that records the settled size, status writes and Events, and a fleet is "+
			"Ready only once the operator has seen its last member ready and written the status. Each of its clients is "+
			"%s: %.1f requests per fleet on the "+
			"client that moves fleets (writes and the premises' fresh reads), %.1f status writes and %.1f Events on "+
			"clients of their own give a floor of %.1f s for %d fleets, %s. The operator's CPU is not the limit "+
			"(the profile below). What would close it: fewer writes per fleet (see below), and no self-inflicted "+
			"conflicts; kube-controller-manager is bound by its own client defaults on the raw path.",
			ratio, median(opS), median(rawS), noise, movingLimit, moving+reads, status, events, floor, n, bound)
	}
	if f := sumSeries(o.failed); f > 0 {
		sec.note("**Failed actions in the overhead runs** (%s per fleet, each retried through the queue with backoff), by "+
			"their errors in the operator's logs: %s.", trim(f/float64(max(o.runs, 1))), topFailures(failures(o.failLogs), 4))
	}
	if o.e2a.total > 0 {
		sec.add("6", "event to action (operator histogram, overhead runs pooled)",
			fmt.Sprintf("p50 %s, p99 %s (%d observations)", q(o.e2a, 0.5), q(o.e2a, 0.99), int(o.e2a.total)), "(no target)", "")
		applies := 0.0
		for k, v := range o.opSeries {
			if strings.HasPrefix(verbResource(k), "apply ") {
				applies += v
			}
		}
		applies /= float64(max(o.runs, 1))
		if p99, _, _ := o.e2a.quantile(0.99); p99 > 1 && applies > 0 && o.movingUnlimited {
			sec.note("**Event to action, p99 %s.** %d fleets arrive at once, %.1f applies each (the 6 objects at "+
				"provisioning, the StatefulSet again to record its settled size), on the client that moves fleets, which "+
				"ran without a client-side limit (the API server runs priority and fairness): an event waits for the "+
				"syncs ahead of it in the queue (wait p99 %s) and for its requests' round trips to an API server, etcd and "+
				"kube-controller-manager loaded by the whole run on this machine's cores.",
				q(o.e2a, 0.99), n, applies, q(o.queueWait, 0.99))
		} else if p99 > 1 && applies > 0 {
			sec.note("**Event to action, p99 %s.** %d fleets arrive at once and their syncs apply objects through the "+
				"limiter of the client that moves fleets (%g QPS, burst %g): %.1f applies per fleet (the 6 objects at provisioning, "+
				"the StatefulSet again to record its settled size), which alone keep that limiter busy for "+
				"(%d x %.1f - %g) / %g = %.1f s; an event whose first action queues behind them waits that long, and a "+
				"sync waits for its requests' round trips to an API server loaded by the whole run.",
				q(o.e2a, 0.99), n, operatorQPS, operatorBurst, applies, n, applies, operatorBurst, operatorQPS, max(0, float64(n)*applies-operatorBurst)/operatorQPS)
		}
	}
	if o.decision.total > 0 {
		sec.add("6", "decision duration, sync start to decision (overhead runs pooled)",
			fmt.Sprintf("p50 %s, p99 %s (%d syncs)", q(o.decision, 0.5), q(o.decision, 0.99), int(o.decision.total)), "(no target)", "")
	}
	if sum := profileSummary(o.profileCum); sum != "" {
		sec.add("7", "CPU profile of the operator in the overhead runs (cumulative shares of its CPU time)", sum, "", "see below")
	}
	return sec
}
