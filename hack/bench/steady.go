package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/kube"
	"github.com/celld/celld-operator/e2e/testenv"
	"github.com/celld/celld-operator/kinds"
)

// --- 4 and 5. memory, writes at rest, the writes of a lifecycle --------------------------------

type memLevel struct {
	fleets      int
	samples     []memSample // operator, after a forced GC
	cached      []float64   // bytes the same objects take decoded in the bench's own heap (live)
	cachedInuse []float64   // the same, as heap in use (with the allocator's span slack)
}

type restResult struct {
	fleets     int
	window     time.Duration
	opWrites   float64
	opSeries   map[string]float64
	api        operatorRequests
	apiErr     error
	resyncAdds float64 // fleets the operator re-enqueued in the window: proof a resync ran
	syncs      float64
	cpu        float64 // the operator's CPU seconds in the window (process_cpu_seconds_total)
}

type lifecycleResult struct {
	fleets   int
	opWrites float64
	opSeries map[string]float64
	failed   map[string]float64
	failLogs []logSpan
	api      operatorRequests
	apiErr   error
}

type steadyResult struct {
	levels    []memLevel
	rest      *restResult
	lifecycle *lifecycleResult
}

// steady runs one operator (--resync-period short, so a window of a minute holds full resyncs)
// and grows one namespace through the memory levels; at the top level, converged, it counts the
// writes at rest, then walks a few more fleets through a whole lifecycle and counts their writes.
func (b *bench) steady(ctx context.Context) (*steadyResult, error) {
	ns, err := b.createNamespace(ctx, "bench-steady")
	if err != nil {
		return nil, err
	}
	ph, err := b.startPhase(ctx, "steady", ns, false, "--resync-period", b.cfg.resync.String())
	if err != nil {
		return nil, err
	}
	defer ph.close()
	op, w, fl := ph.op, ph.w, ph.fl
	res := &steadyResult{}
	have := 0
	for _, level := range b.cfg.memLevels {
		if level > have {
			b.logf("memory: %d -> %d fleets", have, level)
			if err := b.createFleets(ctx, ns, have, level, 3); err != nil {
				return nil, err
			}
			if _, err := fl.wait(ctx, level, runTimeout(level-have)); err != nil {
				return nil, fmt.Errorf("fleets not converged (operator log %s): %w", op.LogPath, err)
			}
			have = level
		}
		if err := b.quiet(ctx, op, 5*time.Second); err != nil {
			return nil, err
		}
		ml, err := b.memLevel(ctx, op, ns, level)
		if err != nil {
			return nil, err
		}
		b.logf("memory: %d fleets: heap in use %s, RSS %s, cached objects ~%s", level,
			bytesStr(med(ml.samples, heapInuse)), bytesStr(med(ml.samples, rss)), bytesStr(median(ml.cached)))
		res.levels = append(res.levels, ml)
	}

	b.logf("writes at rest: %d converged fleets, %s window, resync every %s", have, b.cfg.restWindow, b.cfg.resync)
	if res.rest, err = b.atRest(ctx, op, have, b.cfg.restWindow); err != nil {
		return nil, err
	}
	b.logf("lifecycle: %d fleets: create 3, grow to 6, shrink to 3, delete", b.cfg.lifecycleFleets)
	if res.lifecycle, err = b.lifecycle(ctx, op, ns, w, fl); err != nil {
		return nil, err
	}
	// Nothing runs after this phase: the namespace is left to the control plane, which stops
	// next and is purged by the next run's start, rather than spend a minute deleting it.
	return res, nil
}

// memLevel reads the operator's memory (after a forced GC) and what the cached objects of ns take
// decoded, three times 2 s apart: the report shows the medians.
func (b *bench) memLevel(ctx context.Context, op *operator, ns string, fleets int) (memLevel, error) {
	ml := memLevel{fleets: fleets}
	for range 3 {
		time.Sleep(2 * time.Second)
		s, err := op.memory()
		if err != nil {
			return ml, err
		}
		ml.samples = append(ml.samples, s)
		c, ci, err := b.cachedBytes(ctx, ns)
		if err != nil {
			return ml, err
		}
		ml.cached = append(ml.cached, c)
		ml.cachedInuse = append(ml.cachedInuse, ci)
	}
	return ml, nil
}

// quiet waits until the operator's write counter has not moved for d (at most five minutes): the
// status write that shows a fleet converged is itself a write, and Events are sent in the
// background.
func (b *bench) quiet(ctx context.Context, op *operator, d time.Duration) error {
	_, err := b.quietWithin(ctx, op, d, 5*time.Minute)
	return err
}

// quietWithin is quiet with a bound of its own, for a phase whose fleets go on settling long after
// each is seen converged: thousands of fleets whose status still waits on the workloads' status,
// which kube-controller-manager writes at its own pace. It returns when the counter last moved,
// or when it began to watch it if it never did.
func (b *bench) quietWithin(ctx context.Context, op *operator, d, within time.Duration) (time.Time, error) {
	last, _, err := op.writes()
	if err != nil {
		return time.Time{}, err
	}
	since := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, within, true, func(context.Context) (bool, error) {
		n, _, err := op.writes()
		if err != nil {
			return false, err
		}
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= d, nil
	})
	if wait.Interrupted(err) {
		return since, fmt.Errorf("the operator's writes not quiet for %s within %s (the last at %s): %w",
			d, within, since.Format(time.TimeOnly), err)
	}
	return since, err
}

// atRest counts, once the operator's writes have been quiet for 5 s, what it does over window:
// its own write counter, the API server's count of its requests, its syncs and its CPU time.
func (b *bench) atRest(ctx context.Context, op *operator, fleets int, window time.Duration) (*restResult, error) {
	if err := b.quiet(ctx, op, 5*time.Second); err != nil {
		return nil, err
	}
	res := &restResult{fleets: fleets, window: window}
	m0, err := op.scrape()
	if err != nil {
		return nil, err
	}
	api0, apiErr := b.cl.operatorRequests(ctx)
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m1, err := op.scrape()
	if err != nil {
		return nil, err
	}
	api1, err := b.cl.operatorRequests(ctx)
	if apiErr == nil {
		apiErr = err
	}
	res.apiErr = apiErr
	if apiErr == nil {
		res.api = api1.sub(api0)
	}
	res.opWrites = m1.value("celld_operator_api_writes_total") - m0.value("celld_operator_api_writes_total")
	res.opSeries = testenv.Delta(m1.series("celld_operator_api_writes_total"), m0.series("celld_operator_api_writes_total"))
	q := map[string]string{"name": "celldfleet"}
	res.resyncAdds = m1.sum("workqueue_adds_total", q) - m0.sum("workqueue_adds_total", q)
	res.syncs = m1.histogram("workqueue_work_duration_seconds").total - m0.histogram("workqueue_work_duration_seconds").total
	res.cpu = m1.value("process_cpu_seconds_total") - m0.value("process_cpu_seconds_total")
	return res, nil
}

// addSeries adds b/div into a.
func addSeries(a, b map[string]float64, div float64) map[string]float64 {
	if a == nil {
		a = map[string]float64{}
	}
	for k, v := range b {
		a[k] += v / div
	}
	return a
}

// failedActions are the operator's actions that failed, by kind.
func failedActions(m families) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m["celld_operator_actions_total"] {
		if s.labels["result"] == "error" {
			out[s.labels["kind"]] += s.value
		}
	}
	return out
}

// lifecycle walks k more fleets, in the converged namespace, through create (3 members), grow to
// 6, shrink to 3 and delete, one stage at a time for all of them, and counts the writes.
func (b *bench) lifecycle(ctx context.Context, op *operator, ns string, w *watchers, fl *finishLine) (*lifecycleResult, error) {
	k := b.cfg.lifecycleFleets
	name := func(i int) string { return fmt.Sprintf("lc%03d", i) }
	ours := func(members int32) func(any) bool {
		return func(obj any) bool {
			f, ok := obj.(*v1alpha1.CelldFleet)
			return ok && strings.HasPrefix(f.Name, "lc") && f.Spec.Members == members && fleetConverged(obj)
		}
	}
	if err := b.quiet(ctx, op, 3*time.Second); err != nil {
		return nil, err
	}
	w0, s0, err := op.writes()
	if err != nil {
		return nil, err
	}
	m0, err := op.scrape()
	if err != nil {
		return nil, err
	}
	api0, apiErr := b.cl.operatorRequests(ctx)
	logFrom := op.LogOffset()

	fl.rearm(ours(3))
	if err := parallel(k, func(i int) error {
		_, err := b.cl.celld.CelldV1alpha1().CelldFleets(ns).Create(ctx, newFleet(ns, name(i), 3), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if _, err := fl.wait(ctx, k, runTimeout(k)); err != nil {
		return nil, fmt.Errorf("lifecycle create: %w", err)
	}
	for _, size := range []int32{6, 3} {
		fl.rearm(ours(size))
		patch := fmt.Appendf(nil, `{"spec":{"members":%d}}`, size)
		if err := parallel(k, func(i int) error {
			_, err := b.cl.celld.CelldV1alpha1().CelldFleets(ns).Patch(ctx, name(i), types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}); err != nil {
			return nil, err
		}
		if _, err := fl.wait(ctx, k, runTimeout(k)); err != nil {
			return nil, fmt.Errorf("lifecycle scale to %d: %w", size, err)
		}
	}
	if err := parallel(k, func(i int) error {
		return b.cl.celld.CelldV1alpha1().CelldFleets(ns).Delete(ctx, name(i), metav1.DeleteOptions{})
	}); err != nil {
		return nil, err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, runTimeout(k), true, func(ctx context.Context) (bool, error) {
		for i := range k {
			if _, err := b.cl.celld.CelldV1alpha1().CelldFleets(ns).Get(ctx, name(i), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle delete: fleets not gone: %w", err)
	}
	if err := b.quiet(ctx, op, 5*time.Second); err != nil {
		return nil, err
	}
	w1, s1, err := op.writes()
	if err != nil {
		return nil, err
	}
	m1, err := op.scrape()
	if err != nil {
		return nil, err
	}
	res := &lifecycleResult{fleets: k, opWrites: w1 - w0, opSeries: testenv.Delta(s1, s0), failed: testenv.Delta(failedActions(m1), failedActions(m0)),
		failLogs: []logSpan{{op.LogPath, logFrom, op.LogOffset()}}}
	api1, err := b.cl.operatorRequests(ctx)
	if apiErr == nil {
		apiErr = err
	}
	res.apiErr = apiErr
	if apiErr == nil {
		res.api = api1.sub(api0)
	}
	return res, nil
}

// cachedBytes estimates what the operator's caches hold for namespace ns: the same objects its
// informers watch (same namespaces, same label selectors, stripped as its transforms strip
// them: kube.CacheForm), decoded into the same Go types in this process, measured as the growth of the live heap.
// Index and store overhead is not in it: that counts as the operator's own. It returns the growth
// of the live heap and of the heap in use, to compare like with like with the operator's figures.
func (b *bench) cachedBytes(ctx context.Context, ns string) (live, inuse float64, err error) {
	mc, err := metadata.NewForConfig(b.cl.cfg)
	if err != nil {
		return 0, 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	var keep []any
	add := func(list any, err error) error {
		if err != nil {
			return err
		}
		keep = append(keep, list)
		return nil
	}
	kc, cc := b.cl.kube, b.cl.celld
	managed := metav1.ListOptions{LabelSelector: kube.ManagedSelector}
	all := metav1.ListOptions{}
	steps := []func() error{
		func() error { return add(cc.CelldV1alpha1().CelldFleets(ns).List(ctx, all)) },
		func() error { return add(cc.CelldV1alpha1().CelldReservations("").List(ctx, all)) },
		func() error { return add(kc.AppsV1().StatefulSets(ns).List(ctx, all)) },
		func() error { return add(kc.AppsV1().Deployments(ns).List(ctx, all)) },
		func() error { return add(kc.CoreV1().Pods(ns).List(ctx, managed)) },
		func() error { return add(kc.CoreV1().PersistentVolumeClaims(ns).List(ctx, all)) },
		func() error { return add(kc.CoreV1().Nodes().List(ctx, all)) },
		func() error { return add(kc.StorageV1().StorageClasses().List(ctx, all)) },
		func() error {
			return add(mc.Resource(corev1.SchemeGroupVersion.WithResource("serviceaccounts")).Namespace(ns).List(ctx, all))
		},
	}
	for _, r := range kinds.Owned(false) {
		steps = append(steps, func() error { return add(kube.List(ctx, kc, ns, r.Kind, all)) })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return 0, 0, err
		}
	}
	for _, l := range keep {
		cacheForm(l)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc), float64(after.HeapInuse) - float64(before.HeapInuse), nil
}

// cacheForm does to a list what the operator's informers' transforms do to each object.
func cacheForm(list any) {
	obj, ok := list.(kruntime.Object)
	if !ok {
		return
	}
	// ExtractList gives the items in place, so changing them changes the list's.
	items, err := apimeta.ExtractList(obj)
	if err != nil {
		return
	}
	for _, it := range items {
		kube.CacheForm(it)
	}
}

// section is what the memory levels, the window at rest and the lifecycle put in the report,
// with the resync period of the operator they ran.
func (st *steadyResult) section(resync time.Duration) section {
	var sec section
	if rest := st.rest; rest != nil {
		perHour := rest.opWrites / float64(max(rest.fleets, 1)) / rest.window.Hours()
		v := "met"
		if rest.opWrites != 0 {
			v = fmt.Sprintf("missed: %s", seriesText(rest.opSeries))
		}
		sec.add("4", fmt.Sprintf("writes at rest, operator's counter: %d converged fleets, %s window", rest.fleets, rest.window),
			fmt.Sprintf("%s writes = %s per fleet per hour; %s fleets re-enqueued and %s syncs in the window (resync every %s)",
				trim(rest.opWrites), trim(perHour), trim(rest.resyncAdds), trim(rest.syncs), resync), "0", v)
		if rest.apiErr != nil {
			sec.add("4", "writes at rest, API server side", "n/a: "+oneLine(rest.apiErr.Error()), "0", "not measured")
		} else {
			w := rest.api.totalWrites()
			v := "met"
			if w != 0 {
				v = "missed: " + seriesText(rest.api.writes)
			}
			sec.add("4", "writes at rest, API server side (apiserver_flowcontrol_dispatched_requests_total of flow schemas matching only the operator's user)",
				fmt.Sprintf("%s writes; %s other requests (watches, discovery)", trim(w), trim(rest.api.reads)), "0", v)
		}
	}
	if lc := st.lifecycle; lc != nil {
		k := float64(max(lc.fleets, 1))
		per := lc.opWrites / k
		// The target allows 1.3 times the minimum: what a lifecycle must record beyond its
		// moves (its history, its Events) and a status per change.
		minimum, most := 23.0, 30.0
		v := "met: at the minimum"
		switch {
		case per > most:
			v = fmt.Sprintf("missed: %.1f over the minimum (x%.2f)", per-minimum, per/minimum)
		case per > minimum:
			v = fmt.Sprintf("met: %.1f over the minimum (x%.2f)", per-minimum, per/minimum)
		}
		api := ""
		if lc.apiErr == nil {
			api = fmt.Sprintf("; API server: %s per fleet", trim(lc.api.totalWrites()/k))
		}
		failed := ""
		if f := sumSeries(lc.failed); f > 0 {
			failed = fmt.Sprintf("; %s of them failed and were retried (%s)", trim(f/k), kindsPer(lc.failed, k))
		}
		sec.add("4", fmt.Sprintf("writes per fleet, one lifecycle: create 3, grow to 6, shrink to 3, delete (%d fleets)", lc.fleets),
			fmt.Sprintf("%s per fleet%s%s; by kind per fleet: %s", trim(per), api, failed, seriesPer(lc.opSeries, k)),
			"≤ 30 per fleet (1.3 x the minimum, 23)", v)
		sec.note("**The minimum a lifecycle needs** (PersistentFleet, 23 writes): create 9 (the reservation, the finalizer, "+
			"2 Services, 2 NetworkPolicies, the PDB, the StatefulSet, one status write that shows it Ready); grow 3 -> 6: 2 "+
			"(the StatefulSet, the status); shrink 6 -> 3 one member per step: 4 (the StatefulSet three times, the status once); "+
			"delete: 8 (the StatefulSet to 0 so no member runs when its disk goes, 6 claims: 3 of the members left and "+
			"3 retained by the scale-in, the finalizer). Measured above the minimum, per fleet: %s. A fleet's status is "+
			"written at most once every 10 s, the latest of it, and at once when the fleet arrives (Ready), so a "+
			"change costs a write on arrival and one per 10 s it lasts, a new fleet none until it is 10 s old, and a deletion none until it has lasted 10 s; the settled size is recorded on the StatefulSet by "+
			"one more apply after each rollout (the state is derived from the workload, not stored); the capacity history "+
			"is appended to the reservation's status in one write per step that decides (the restart proof of the step "+
			"policy: the growth, the scale-in request with its first step, each later step; not a fleet's first apply, which ends no request); Events are one "+
			"per change, when it starts (the growth, the scale-in, the deletion), one when the fleet is first Steady, and one "+
			"naming the disks a deletion deletes.", excess(lc.opSeries, k))
	}
	if lc := st.lifecycle; lc != nil && sumSeries(lc.failed) > 0 {
		sec.note("**Failed actions in the lifecycle** (%s per fleet, retried), by their errors in the operator's log: %s.",
			trim(sumSeries(lc.failed)/float64(max(lc.fleets, 1))), topFailures(failures(lc.failLogs), 4))
	}
	if len(st.levels) > 0 {
		base := st.levels[0]
		for _, l := range st.levels {
			sec.add("5", fmt.Sprintf("memory, %d fleets of 3 (after a forced GC; median of 3)", l.fleets), memLevelText(l), "", "")
		}
		for _, l := range st.levels[1:] {
			if l.fleets <= base.fleets {
				continue
			}
			measured, v := memPerFleet(base, l)
			sec.add("5", fmt.Sprintf("memory per fleet, %d -> %d fleets", base.fleets, l.fleets), measured, memTarget, v)
		}
	}
	return sec
}

// memLevelText is what a memory level measured: the medians of its samples.
func memLevelText(l memLevel) string {
	return fmt.Sprintf("heap in use %s, heap live %s, RSS %s; the cached API objects ~%s",
		bytesStr(med(l.samples, heapInuse)), bytesStr(med(l.samples, heapAlloc)), bytesStr(med(l.samples, rss)), bytesStr(median(l.cached)))
}

const memTarget = "< 64 KiB per fleet"

// memPerFleet is the growth per fleet from base to l, and the verdict on the target: the live
// heap the operator grew by beyond what the cached objects grew by, under 64 KiB per fleet.
func memPerFleet(base, l memLevel) (measured, verdict string) {
	d := float64(l.fleets - base.fleets)
	heap := (med(l.samples, heapAlloc) - med(base.samples, heapAlloc)) / d
	inuse := (med(l.samples, heapInuse) - med(base.samples, heapInuse)) / d
	rssD := (med(l.samples, rss) - med(base.samples, rss)) / d
	cache := (median(l.cached) - median(base.cached)) / d
	cacheInuse := (median(l.cachedInuse) - median(base.cachedInuse)) / d
	over, overInuse := heap-cache, inuse-cacheInuse
	verdict = "met"
	if over >= 64*1024 {
		verdict = fmt.Sprintf("missed by %s", bytesStr(over-64*1024))
	}
	return fmt.Sprintf("heap live +%s, heap in use +%s, RSS +%s; the cached objects %s live, %s in use; "+
		"**overhead beyond the cached objects %s live** (%s by heap in use)",
		bytesStr(heap), bytesStr(inuse), bytesStr(rssD), bytesStr(cache), bytesStr(cacheInuse), bytesStr(over), bytesStr(overInuse)), verdict
}
