package main

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// operatorQPS is the client rate limit cmd/celld-operator/run.go sets (QPS 20, burst 50); the
// notes use it to tell how much of the operator's time its own client's limiter accounts for.
const (
	operatorQPS   = 20.0
	operatorBurst = 50.0
)

type report struct {
	cfg     config
	started time.Time
	took    time.Duration
	machine string

	core        []*coreResult
	coreErr     error
	clusterErr  error
	overhead    *overheadResult
	overheadErr error
	scaleIn     *scaleInResult
	scaleInErr  error
	steady      *steadyResult
	steadyErr   error
	// terminating counts the operator's log lines about applies refused in a namespace being
	// deleted: the runs' cleanup.
	terminating int
}

func numCPU() int { return runtime.NumCPU() }

func (r *report) failed() bool {
	return r.coreErr != nil || r.clusterErr != nil || r.overheadErr != nil || r.scaleInErr != nil || r.steadyErr != nil
}

type row struct{ n, what, measured, target, verdict string }

func (r *report) markdown() string {
	var rows []row
	var notes []string
	add := func(n, what, measured, target, verdict string) {
		rows = append(rows, row{n, what, measured, target, verdict})
	}
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	errRow := func(n, what string, err error) { add(n, what, "**failed**: "+oneLine(err.Error()), "", "not measured") }
	n := r.cfg.fleets

	// 1. core
	if r.coreErr != nil {
		errRow("1", "core: machine benchmarks", r.coreErr)
	}
	var slowConverged []*coreResult
	for _, c := range r.core {
		name := strings.TrimPrefix(c.name, "Step")
		allocs := median(c.allocs)
		measured := fmt.Sprintf("%s decisions/s (min %s, max %s); %s allocs, %s per decision",
			si(median(c.decisions)), si(minOf(c.decisions)), si(maxOf(c.decisions)), trim(allocs), bytesStr(median(c.bytes)))
		if strings.HasPrefix(c.name, "StepConverged") {
			ok := median(c.decisions) >= 1e6 && allocs == 0
			v := "met"
			if !ok {
				v = missText(median(c.decisions), 1e6, allocs)
				slowConverged = append(slowConverged, c)
			}
			add("1", "core: "+strings.Replace(name, "Converged/", "converged fleet, ", 1), measured, "≥ 1,000,000/s per core, 0 allocs", v)
		} else {
			add("1", "core: change, "+strings.TrimPrefix(name, "Change/"), measured, "(no target)", "")
		}
	}
	if len(slowConverged) > 0 {
		var names []string
		for _, c := range slowConverged {
			names = append(names, fmt.Sprintf("%s (%.0f ns per decision)", strings.TrimPrefix(c.name, "StepConverged/"), 1e9/median(c.decisions)))
		}
		note("**Core, converged target missed** for %s. A converged step is one fingerprint of the view "+
			"compared with the last quiet decision's (machine/quiet.go), and the fingerprint hashes every member's resourceVersion "+
			"and looks up its node: it is O(members), so 99 members cost about 10x what 3 do. What would close it: "+
			"fingerprint once per observation, where Normalize already walks every member, or keep a per-member hash that only "+
			"changed members update. In the operator a whole decision, cache reads included, takes well under a millisecond "+
			"(the decision duration below), far less than the API requests of a sync, so this does not show in the other figures.",
			strings.Join(names, ", "))
	}

	// 2. overhead, 6. event to action, 7. profile
	if r.overheadErr != nil {
		errRow("2", "overhead against the floor", r.overheadErr)
	}
	if o := r.overhead; o != nil && len(o.op) > 0 && len(o.raw) > 0 {
		opS, rawS := seconds(o.op), seconds(o.raw)
		add("2", fmt.Sprintf("overhead: %d fleets of 3 created at once through the operator, until all Ready", n),
			spread(opS, "s")+runsText(opS), "", "")
		add("2", fmt.Sprintf("overhead: the same %d StatefulSets (+ their 2 Services, 2 NetworkPolicies, PDB) created directly, no operator, until all replicas ready", n),
			spread(rawS, "s")+runsText(rawS), "", "")
		ratio := median(opS) / median(rawS)
		v := "met"
		if ratio > 1.10 {
			v = fmt.Sprintf("missed by %.0f%% (%.2f over 1.10)", (ratio/1.10-1)*100, ratio-1.10)
		}
		add("2", "overhead: ratio of the medians, operator / raw", fmt.Sprintf("%.2f (min/max across pairs %.2f-%.2f)", ratio, minOf(opS)/maxOf(rawS), maxOf(opS)/minOf(rawS)), "≤ 1.10", v)
		if len(o.opWrites) > 0 {
			api := "n/a"
			if len(o.apiWrites) > 0 {
				api = fmt.Sprintf("%s writes and %s other requests", trim(median(o.apiWrites)), trim(median(o.apiReads)))
			}
			add("2", "overhead: the operator's requests per fleet, create to Ready (median of the runs)",
				fmt.Sprintf("%s writes by its counter; API server, its user: %s; by kind: %s", trim(median(o.opWrites)), api,
					seriesPer(o.opSeries, float64(o.runs))), "", "")
		}
		if f := sumSeries(o.failed) / float64(max(o.runs, 1)); f > 0 {
			add("2", "overhead: the operator's failed actions per fleet (retried)", fmt.Sprintf("%s: %s", trim(f), kindsPer(o.failed, float64(o.runs))), "", "")
		}
		if o.queueWait.total > 0 {
			add("2", "overhead: the operator's workqueue, wait in queue / sync duration (runs pooled)",
				fmt.Sprintf("wait p50 %s, p99 %s; sync p50 %s, p99 %s (%d syncs)", q(o.queueWait, 0.5), q(o.queueWait, 0.99),
					q(o.work, 0.5), q(o.work, 0.99), int(o.work.total)), "(no target)", "")
		}
		if ratio > 1.10 && len(o.opWrites) > 0 {
			celld, kubeW := byClient(o.opSeries, float64(max(o.runs, 1)))
			celldR, kubeR := 0.0, 0.0
			if len(o.celldReads) > 0 {
				celldR, kubeR = median(o.celldReads), median(o.apiReads)-median(o.celldReads)
			}
			floorOf := func(w float64) float64 { return max(0, float64(n)*w-operatorBurst) / operatorQPS }
			floor := max(floorOf(celld+celldR), floorOf(kubeW+kubeR))
			bound := "so at this size the limiter is not what bounds the run"
			if floor >= 0.5*median(opS) {
				bound = "so the limiter alone accounts for most of the operator run"
			}
			lo, hi := minOf(opS)/maxOf(rawS), maxOf(opS)/minOf(rawS)
			noise := fmt.Sprintf("every pairing of runs misses (ratios %.2f-%.2f)", lo, hi)
			if lo <= 1.10 {
				noise = fmt.Sprintf("the ratios of single runs range %.2f-%.2f, so the miss is within this machine's noise", lo, hi)
			}
			note("**Overhead target missed** (ratio %.2f: %.1f s against %.1f s; %s). The raw path creates the 6 objects of a "+
				"fleet from an unthrottled client and kube-controller-manager brings the members up. The operator path does the "+
				"same controller work, but its own requests come first and last: per fleet the reservation, the finalizer, the 6 "+
				"applies, a second StatefulSet apply that records the settled size, status writes and Events, and a fleet is "+
				"Ready only once the operator has seen its last member ready and written the status. Its client is limited to "+
				"20 QPS, burst 50, per clientset (hard-coded in cmd/celld-operator/run.go): %.1f celld.io requests (on one "+
				"limiter) and %.1f Kubernetes requests (on another) per fleet give a floor of %.1f s for %d fleets, %s (its "+
				"celld.io requests ran at %.1f/s over the median run). The operator's CPU is not the limit "+
				"(the profile below). What would close it: fewer writes per fleet (a status write per state change rather than "+
				"per observed member change, no self-inflicted conflicts, see below), and --kube-api-qps/--kube-api-burst "+
				"flags sized to the fleet count; kube-controller-manager is bound by the same client defaults on the raw path.",
				ratio, median(opS), median(rawS), noise, celld+celldR, kubeW+kubeR, floor, n, bound, float64(n)*(celld+celldR)/median(opS))
		}
		if f := sumSeries(o.failed); f > 0 {
			note("**Failed actions in the overhead runs** (%s per fleet, each retried through the queue with backoff), by "+
				"their errors in the operator's logs: %s.", trim(f/float64(max(o.runs, 1))), topFailures(failures(o.failLogs), 4))
		}
		if o.e2a.total > 0 {
			add("6", "event to action (operator histogram, overhead runs pooled)",
				fmt.Sprintf("p50 %s, p99 %s (%d observations)", q(o.e2a, 0.5), q(o.e2a, 0.99), int(o.e2a.total)), "(no target)", "")
			applies := 0.0
			for k, v := range o.opSeries {
				if strings.HasPrefix(verbResource(k), "apply ") {
					applies += v
				}
			}
			applies /= float64(max(o.runs, 1))
			if p99, _, _ := o.e2a.quantile(0.99); p99 > 1 && applies > 0 {
				note("**Event to action, p99 %s.** %d fleets arrive at once and their syncs apply objects through the "+
					"Kubernetes clientset's limiter (20 QPS, burst 50): %.1f applies per fleet (the 6 objects at provisioning, "+
					"the StatefulSet again to record its settled size), which alone keep that limiter busy for "+
					"(%d x %.1f - 50) / 20 = %.1f s; an event whose first action queues behind them waits that long. The run as a whole stays close to the floor "+
					"because the floor is bound the same way: kube-controller-manager's clients default to 20 QPS (burst 30), "+
					"and its StatefulSet controller creates every Pod and claim and writes the StatefulSets' status through "+
					"one. Against a faster floor, or with more fleets at once, this is where the operator falls behind.",
					q(o.e2a, 0.99), n, applies, n, applies, max(0, float64(n)*applies-operatorBurst)/operatorQPS)
			}
		}
		if o.decision.total > 0 {
			add("6", "decision duration, sync start to decision (overhead runs pooled)",
				fmt.Sprintf("p50 %s, p99 %s (%d syncs)", q(o.decision, 0.5), q(o.decision, 0.99), int(o.decision.total)), "(no target)", "")
		}
		if sum := profileSummary(o.profileCum); sum != "" {
			add("7", "CPU profile of the operator in the overhead runs (cumulative shares of its CPU time)", sum, "", "see below")
		}
	}

	// 3. scale-in
	if r.scaleInErr != nil {
		errRow("3", "scale-in walk", r.scaleInErr)
	}
	if s := r.scaleIn; s != nil {
		add("3", fmt.Sprintf("scale-in: %d fleets 6 -> 3 at once (3 one-member steps each), until all Ready at 3", s.fleets),
			fmt.Sprintf("%.1f s", s.total.Seconds()), "", "")
		add("3", "scale-in: decision latency, a step rolled out -> the next replicas write (bench's watches)",
			fmt.Sprintf("p50 %s, p99 %s, max %s (%d steps)", durStr(percentile(s.steps, 0.5)), durStr(percentile(s.steps, 0.99)), durStr(maxOf(s.steps)), len(s.steps)),
			"(no target)", "")
		add("3", "scale-in: spec change -> the first replicas write",
			fmt.Sprintf("p50 %s, p99 %s (%d fleets)", durStr(percentile(s.first, 0.5)), durStr(percentile(s.first, 0.99)), len(s.first)), "(no target)", "")
		if s.decision.total > 0 {
			add("3", "scale-in: decision duration (operator histogram)",
				fmt.Sprintf("p50 %s, p99 %s (%d syncs)", q(s.decision, 0.5), q(s.decision, 0.99), int(s.decision.total)), "(no target)", "")
		}
		if s.queueWait.total > 0 {
			add("3", "scale-in: the operator's workqueue, wait in queue / sync duration",
				fmt.Sprintf("wait p50 %s, p99 %s; sync p50 %s, p99 %s (%d syncs)", q(s.queueWait, 0.5), q(s.queueWait, 0.99),
					q(s.work, 0.5), q(s.work, 0.99), int(s.work.total)), "(no target)", "")
		}
		k := float64(max(s.fleets, 1))
		celld, kubeW := byClient(s.writes, k)
		celldR, kubeR := 0.0, 0.0
		reads := "API server count n/a"
		if s.apiErr == nil {
			celldR, kubeR = s.api.celldReads/k, (s.api.reads-s.api.celldReads)/k
			reads = fmt.Sprintf("and %s celld.io and %s other reads (API server)", trim(celldR), trim(kubeR))
		}
		failed := ""
		if f := sumSeries(s.failed); f > 0 {
			failed = fmt.Sprintf("; %s failed and retried (%s)", trim(f/k), kindsPer(s.failed, k))
		}
		add("3", "scale-in: the operator's requests per fleet",
			fmt.Sprintf("%s writes (%s) %s%s", trim(celld+kubeW), seriesPer(s.writes, k), reads, failed), "", "")
		dec, _, _ := s.decision.quantile(0.5)
		work, _, _ := s.work.quantile(0.5)
		if s.total.Seconds() > 0 && work > 10*dec {
			// The limiter bounds the walk when the requests beyond its burst ran at close to its rate.
			rate := (float64(s.fleets)*(celld+celldR) - operatorBurst) / s.total.Seconds()
			why := fmt.Sprintf("Its celld.io requests beyond the limiter's burst ran at %.1f/s, under the 20 QPS limit: "+
				"the time a sync takes is its requests' round trips to a loaded API server.", max(rate, 0))
			if rate >= 0.8*operatorQPS {
				why = fmt.Sprintf("Its celld.io requests (status writes, the history append's read and update of the "+
					"reservation) beyond the limiter's burst ran at %.1f/s against the 20 QPS limit: the 4 workers wait their "+
					"turns at that limiter, so a sync of a few requests takes hundreds of milliseconds and a fleet waits in the "+
					"queue behind the others' syncs; the latency seen from the watches is that queueing.", rate)
			}
			note("**Scale-in: the decision takes microseconds, the step takes seconds.** The machine decides in %s "+
				"(p50), a sync lasts %s (p50) and a fleet waits %s (p50) in the queue; a step, from rolled out to the next "+
				"replicas write, takes %s (p50) as the watches see it. The walk made %.1f celld.io and %.1f Kubernetes "+
				"requests per fleet in %.1f s. %s What would close it: fewer requests per step (the history append reads "+
				"and writes the reservation, the status is written several times per step), and a client QPS sized to the "+
				"fleet count.",
				q(s.decision, 0.5), q(s.work, 0.5), q(s.queueWait, 0.5), durStr(percentile(s.steps, 0.5)), celld+celldR, kubeW+kubeR,
				s.total.Seconds(), why)
		}
	}

	// 4 and 5. writes and memory
	if r.steadyErr != nil {
		errRow("4-5", "writes at rest, lifecycle writes, memory", r.steadyErr)
	}
	if st := r.steady; st != nil {
		if rest := st.rest; rest != nil {
			perHour := rest.opWrites / float64(max(rest.fleets, 1)) / rest.window.Hours()
			v := "met"
			if rest.opWrites != 0 {
				v = fmt.Sprintf("missed: %s", seriesText(rest.opSeries))
			}
			add("4", fmt.Sprintf("writes at rest, operator's counter: %d converged fleets, %s window", rest.fleets, rest.window),
				fmt.Sprintf("%s writes = %s per fleet per hour; %s fleets re-enqueued and %s syncs in the window (resync every %s)",
					trim(rest.opWrites), trim(perHour), trim(rest.resyncAdds), trim(rest.syncs), r.cfg.resync), "0", v)
			if rest.apiErr != nil {
				add("4", "writes at rest, API server side", "n/a: "+oneLine(rest.apiErr.Error()), "0", "not measured")
			} else {
				w := rest.api.totalWrites()
				v := "met"
				if w != 0 {
					v = "missed: " + seriesText(rest.api.writes)
				}
				add("4", "writes at rest, API server side (apiserver_flowcontrol_dispatched_requests_total of flow schemas matching only the operator's user)",
					fmt.Sprintf("%s writes; %s other requests (watches, discovery)", trim(w), trim(rest.api.reads)), "0", v)
			}
		}
		if lc := st.lifecycle; lc != nil {
			k := float64(max(lc.fleets, 1))
			per := lc.opWrites / k
			minimum := 23.0
			v := "at the minimum"
			if per > minimum {
				v = fmt.Sprintf("%.1f over the minimum (x%.2f)", per-minimum, per/minimum)
			}
			api := ""
			if lc.apiErr == nil {
				api = fmt.Sprintf("; API server: %s per fleet", trim(lc.api.totalWrites()/k))
			}
			failed := ""
			if f := sumSeries(lc.failed); f > 0 {
				failed = fmt.Sprintf("; %s of them failed and were retried (%s)", trim(f/k), kindsPer(lc.failed, k))
			}
			add("4", fmt.Sprintf("writes per fleet, one lifecycle: create 3, grow to 6, shrink to 3, delete (%d fleets)", lc.fleets),
				fmt.Sprintf("%s per fleet%s%s; by kind per fleet: %s", trim(per), api, failed, seriesPer(lc.opSeries, k)),
				"minimum 23", v)
			note("**The minimum a lifecycle needs** (PersistentFleet, 23 writes): create 9 (the reservation, the finalizer, "+
				"2 Services, 2 NetworkPolicies, the PDB, the StatefulSet, one status write that shows it Ready); grow 3 -> 6: 2 "+
				"(the StatefulSet, the status); shrink 6 -> 3 one member per step: 4 (the StatefulSet three times, the status once); "+
				"delete: 8 (the StatefulSet to 0 so no member runs when its disk goes, 6 claims: 3 of the members left and "+
				"3 retained by the scale-in, the finalizer). Measured above the minimum, per fleet: %s. The status is written on "+
				"every change the operator observes (each member created, scheduled, ready or gone changes the counts or "+
				"blockedBy), not once per state; the settled size is recorded on the StatefulSet by one more apply after each "+
				"rollout; the capacity history is appended to the reservation's status per decision; Events are sent per state "+
				"change and per deleted disk.", excess(lc.opSeries, k))
		}
		if lc := st.lifecycle; lc != nil && sumSeries(lc.failed) > 0 {
			note("**Failed actions in the lifecycle** (%s per fleet, retried), by their errors in the operator's log: %s.",
				trim(sumSeries(lc.failed)/float64(max(lc.fleets, 1))), topFailures(failures(lc.failLogs), 4))
		}
		if len(st.levels) > 0 {
			base := st.levels[0]
			for _, l := range st.levels {
				add("5", fmt.Sprintf("memory, %d fleets of 3 (after a forced GC; median of 3)", l.fleets),
					fmt.Sprintf("heap in use %s, heap live %s, RSS %s; the cached API objects ~%s",
						bytesStr(med(l.samples, heapInuse)), bytesStr(med(l.samples, heapAlloc)), bytesStr(med(l.samples, rss)), bytesStr(median(l.cached))), "", "")
			}
			for _, l := range st.levels[1:] {
				if l.fleets <= base.fleets {
					continue
				}
				d := float64(l.fleets - base.fleets)
				heap := (med(l.samples, heapAlloc) - med(base.samples, heapAlloc)) / d
				inuse := (med(l.samples, heapInuse) - med(base.samples, heapInuse)) / d
				rssD := (med(l.samples, rss) - med(base.samples, rss)) / d
				cache := (median(l.cached) - median(base.cached)) / d
				cacheInuse := (median(l.cachedInuse) - median(base.cachedInuse)) / d
				over, overInuse := heap-cache, inuse-cacheInuse
				v := "met"
				if over >= 64*1024 {
					v = fmt.Sprintf("missed by %s", bytesStr(over-64*1024))
				}
				add("5", fmt.Sprintf("memory per fleet, %d -> %d fleets", base.fleets, l.fleets),
					fmt.Sprintf("heap live +%s, heap in use +%s, RSS +%s; the cached objects %s live, %s in use; "+
						"**overhead beyond the cached objects %s live** (%s by heap in use)",
						bytesStr(heap), bytesStr(inuse), bytesStr(rssD), bytesStr(cache), bytesStr(cacheInuse), bytesStr(over), bytesStr(overInuse)),
					"< 64 KiB per fleet", v)
			}
		}
	}
	if r.clusterErr != nil {
		errRow("2-6", "control plane", r.clusterErr)
	}
	if r.terminating > 0 {
		note("**Cleanup: the operator re-creates what a namespace deletion removes.** When a run's namespace is deleted "+
			"with fleets in it, the namespace controller deletes their StatefulSets, Services and reservations while the "+
			"fleets themselves wait on their finalizer; the operator, seeing a fleet without its objects, falls back to "+
			"Provisioning and applies them again, and the API server refuses: %d log lines \"unable to create new content "+
			"in namespace ... because it is being terminated\" (at error level) in this run's operator logs. Harmless, "+
			"but noise at error level and retries with backoff; a refused create in a terminating namespace could be "+
			"treated as the fleet's deletion rather than an error. Deleting the namespace also deletes the fleets' "+
			"CelldReservations, which live in it: a namespace deletion releases the buckets, whereas a fleet deleted on "+
			"its own keeps its bucket reserved until a person deletes the reservation (README).", r.terminating)
	}

	var out strings.Builder
	mode := "quick mode"
	if n >= 500 {
		mode = "long mode"
	}
	fmt.Fprintf(&out, "# Benchmarks\n\n")
	fmt.Fprintf(&out, "generated by make bench on %s, on %s; %s: %d fleets, %d operator and %d raw runs; took %s. "+
		"Do not edit: run `make bench` (or `BENCH_FLEETS=500 make bench`) to regenerate.\n\n",
		r.started.UTC().Format("2006-01-02 15:04 MST"), r.machine, mode, n, r.cfg.repeats, r.cfg.repeats, r.took.Round(time.Second))
	fmt.Fprintf(&out, "| # | what | measured | target | verdict |\n|---|---|---|---|---|\n")
	for _, x := range rows {
		fmt.Fprintf(&out, "| %s | %s | %s | %s | %s |\n", x.n, esc(x.what), esc(x.measured), esc(x.target), esc(x.verdict))
	}
	if len(notes) > 0 {
		out.WriteString("\n## Notes\n\n")
		for _, s := range notes {
			out.WriteString("- " + s + "\n")
		}
	}
	if o := r.overhead; o != nil && (o.profileTop != "" || o.profileErr != nil) {
		fmt.Fprintf(&out, "\n## CPU profile of the operator during the overhead runs\n\n")
		if o.profileErr != nil {
			fmt.Fprintf(&out, "profile: %s\n\n", oneLine(o.profileErr.Error()))
		}
		if o.profileTop != "" {
			fmt.Fprintf(&out, "%d back-to-back 5 s profiles of every counted operator run, merged (`go tool pprof -top`):\n\n```\n%s\n```\n\n", len(o.profiles), o.profileTop)
			fmt.Fprintf(&out, "The operator's own code by cumulative time (`-top -cum -show=celld/celld-operator`):\n\n```\n%s\n```\n", o.profileOwn)
		}
	}
	out.WriteString(method(r.cfg))
	return out.String()
}

func method(c config) string {
	return fmt.Sprintf(`
## How it is measured

- Everything runs on one machine in one run: the bench's own control plane (cluster/ scripts with
  CLUSTER_CACHE=%s and ports of its own; %d kwok nodes), the operator as a process of its own user
  (a client certificate from the cluster CA, bound to deploy/rbac's ClusterRole), and the bench.
- Fleets are PersistentFleets (an ordered StatefulSet, one 1Gi kwok-volume claim per member),
  100m CPU / 128Mi per member, scaleInStabilization 0s.
- Overhead: the operator is started and its caches synced before the clock starts; the clock runs
  from the first create to the last fleet seen converged (Steady, Ready=True, every member ready,
  observedGeneration current) by the bench's watch. The raw run creates what render.Render
  renders for the same fleets (owner references removed), and stops the clock at the last
  StatefulSet with readyReplicas == replicas. Runs alternate, after one uncounted warm-up run of
  each kind with up to 5 fleets; every run has its own namespace, deleted and waited for.
- Scale-in latency is timed from the bench's watches of StatefulSets and Pods: a step is rolled
  out when the controller observed it and every replica is updated and ready with no Pod above the
  size left; the latency ends at the watch event of the next spec.replicas the operator writes.
- Writes at rest: an operator with --resync-period=%s, every fleet converged and its write counter
  quiet for 5 s, then a %s window. The API server's count comes from flow schemas that match the
  operator's user only (exempt priority level, as the bench's admin client is): one per write verb,
  one for its other requests to celld.io and one for the rest.
- Memory: go_memstats_heap_inuse_bytes, go_memstats_heap_alloc_bytes and
  process_resident_memory_bytes from the operator's /metrics, each read right after a GC forced
  through /debug/pprof/heap?gc=1 (the operator runs with --pprof). "Cached API objects" lists the
  objects the operator's informers hold (same namespaces, label selectors and managedFields
  transform) and measures their decoded size in the bench's own heap, live and in use; the
  target's verdict compares live with live.
- Quantiles of the operator's histograms are interpolated inside buckets (as histogram_quantile
  does); raw samples use the nearest rank.
`, c.clusterCache, c.nodes, c.resync, c.restWindow)
}

// pprofTop merges the profiles and prints go tool pprof's top table with the given options.
func pprofTop(root string, files []string, opts ...string) (string, error) {
	args := append([]string{"tool", "pprof", "-top"}, opts...)
	args = append(args, files...)
	var out, stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go tool pprof: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

// profileSummary reads a -top -cum table: how much CPU the profiles hold against their duration,
// and the cumulative share of the parts of a sync and of the watches.
func profileSummary(cum string) string {
	shares := map[string]string{}
	header := ""
	for _, l := range strings.Split(cum, "\n") {
		if strings.HasPrefix(l, "Duration:") {
			header = l
		}
		f := strings.Fields(l)
		if len(f) >= 6 && strings.HasSuffix(f[4], "%") {
			shares[strings.Join(f[5:], " ")] = f[4]
		}
	}
	var parts []string
	var dur, total, pct string
	if _, err := fmt.Sscanf(header, "Duration: %s Total samples = %s ( %s", &dur, &total, &pct); err == nil {
		parts = append(parts, fmt.Sprintf("%s of CPU in %s of profiles (%s of one core)", total, strings.TrimSuffix(dur, ","), strings.TrimSuffix(pct, ")")))
	}
	for _, x := range []struct{ label, fn string }{
		{"Sync", "github.com/celld/celld-operator/drivers/kube.(*Controller).Sync"},
		{"its API requests (Applier.Do)", "github.com/celld/celld-operator/drivers/kube.(*Applier).Do"},
		{"status writes", "github.com/celld/celld-operator/drivers/kube.(*Applier).publishStatus"},
		{"machine.Step", "github.com/celld/celld-operator/machine.(*Fleet).Step"},
		{"drift comparison (render.Matches)", "github.com/celld/celld-operator/render.Matches"},
		{"Observe", "github.com/celld/celld-operator/drivers/kube.(*Informers).Observe"},
		{"decoding watch events (client-go)", "k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive"},
		{"GC", "runtime.gcBgMarkWorker"},
	} {
		if v, ok := shares[x.fn]; ok {
			parts = append(parts, x.label+" "+v)
		}
	}
	return strings.Join(parts, "; ")
}

func heapInuse(s memSample) float64 { return s.heapInuse }
func heapAlloc(s memSample) float64 { return s.heapAlloc }
func rss(s memSample) float64       { return s.rss }

func med(s []memSample, f func(memSample) float64) float64 { return median(pick(s, f)) }

func minOf(xs []float64) float64 { lo, _ := minMax(xs); return lo }
func maxOf(xs []float64) float64 { _, hi := minMax(xs); return hi }

func spread(xs []float64, unit string) string {
	return fmt.Sprintf("median %.1f %s (min %.1f, max %.1f)", median(xs), unit, minOf(xs), maxOf(xs))
}

func runsText(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.1f", x))
	}
	return "; runs in order: " + strings.Join(parts, ", ")
}

func missText(got, want, allocs float64) string {
	var parts []string
	if got < want {
		parts = append(parts, fmt.Sprintf("missed: %.1fx short of 1,000,000/s", want/got))
	}
	if allocs != 0 {
		parts = append(parts, fmt.Sprintf("%s allocs", trim(allocs)))
	}
	return strings.Join(parts, "; ")
}

func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func trim(v float64) string {
	switch {
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) < 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func durStr(s float64) string {
	switch {
	case math.IsNaN(s):
		return "n/a"
	case math.IsInf(s, 1):
		return "+Inf"
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 0.001:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

func seriesText(s map[string]float64) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, trim(s[k])))
	}
	return strings.Join(parts, ", ")
}

// seriesPer shows the operator's write series divided by k, "verb resource n", largest first.
func seriesPer(s map[string]float64, k float64) string {
	per := map[string]float64{}
	for key, v := range s {
		per[verbResource(key)] += v
	}
	return kindsPer(per, k)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func esc(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// q is a quantile of an operator histogram, with the bucket it falls in when the buckets are
// wide enough (x4 and more) that the interpolated figure says little by itself.
func q(h histogram, p float64) string {
	v, lo, hi := h.quantile(p)
	if lo > 0 && hi/lo >= 4 {
		return fmt.Sprintf("%s (bucket %s-%s)", durStr(v), durStr(lo), durStr(hi))
	}
	return durStr(v)
}

func sumSeries(s map[string]float64) float64 {
	t := 0.0
	for _, v := range s {
		t += v
	}
	return t
}

// kindsPer renders "kind n" pairs divided by k, largest first.
func kindsPer(s map[string]float64, k float64) string {
	keys := make([]string, 0, len(s))
	for key := range s {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return s[keys[i]] > s[keys[j]] || (s[keys[i]] == s[keys[j]] && keys[i] < keys[j]) })
	var parts []string
	for _, key := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", key, trim(s[key]/k)))
	}
	return strings.Join(parts, ", ")
}

// verbResource turns a write series' labels (resource=...,verb=...) into "verb resource".
func verbResource(key string) string {
	verb, res := "", ""
	for _, p := range strings.Split(key, ",") {
		if a, b, ok := strings.Cut(p, "="); ok {
			switch a {
			case "verb":
				verb = b
			case "resource":
				res = b
			}
		}
	}
	return verb + " " + res
}

// byClient splits write series into those of the celld.io clientset and those of the Kubernetes
// one, divided by k: each clientset has its own rate limiter.
func byClient(s map[string]float64, k float64) (celld, kube float64) {
	for key, v := range s {
		if strings.Contains(key, "resource=celld") {
			celld += v / k
		} else {
			kube += v / k
		}
	}
	return celld, kube
}

// lifecycleMinimum is the minimum of each kind of write a PersistentFleet's lifecycle needs
// (create 3, grow to 6, shrink to 3, delete); the note printed with it says why.
var lifecycleMinimum = map[string]float64{
	"create celldreservations": 1, "patch celldfleets": 2, "apply services": 2, "apply networkpolicies": 2,
	"apply poddisruptionbudgets": 1, "apply statefulsets": 6, "update celldfleets/status": 3,
	"delete persistentvolumeclaims": 6,
}

// excess lists, per fleet, the kinds of writes measured above their minimum, largest first.
func excess(s map[string]float64, k float64) string {
	per := map[string]float64{}
	for key, v := range s {
		per[verbResource(key)] += v / k
	}
	over := map[string]float64{}
	for kind, v := range per {
		if d := v - lifecycleMinimum[kind]; d > 0.05 {
			over[kind] = d
		}
	}
	if len(over) == 0 {
		return "nothing"
	}
	return kindsPer(over, 1)
}

// topFailures renders the n most frequent failures with their counts.
func topFailures(f map[string]float64, n int) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return f[keys[i]] > f[keys[j]] || (f[keys[i]] == f[keys[j]] && keys[i] < keys[j]) })
	if len(keys) == 0 {
		return "none found in the logs"
	}
	var parts []string
	for i, k := range keys {
		if i == n {
			parts = append(parts, fmt.Sprintf("%d more kinds", len(keys)-n))
			break
		}
		action, msg, _ := strings.Cut(k, ":")
		parts = append(parts, fmt.Sprintf("%s x%s: %s", action, trim(f[k]), strings.TrimSpace(msg)))
	}
	return strings.Join(parts, "; ")
}
