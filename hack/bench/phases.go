package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/kube"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/internal/testenv"
	"github.com/celld/celld-operator/kinds"
)

// runTimeout bounds one run of n fleets.
func runTimeout(n int) time.Duration { return 5*time.Minute + time.Duration(n)*2*time.Second }

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
	logFrom := op.logOffset()
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
		res.failLogs = append(res.failLogs, logSpan{op.LogPath, logFrom, op.logOffset()})
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

// --- 3. scale-in walk ----------------------------------------------------------------------------

type scaleInResult struct {
	fleets    int
	total     time.Duration
	steps     []float64 // seconds from a step rolled out to the operator's next replicas write
	first     []float64 // seconds from the spec change to the first replicas write
	decision  histogram
	e2a       histogram
	queueWait histogram
	work      histogram
	failed    map[string]float64
	writes    map[string]float64 // the operator's writes in the walk, by verb and resource
	api       operatorRequests   // the API server's count of the operator's requests in the walk
	apiErr    error
}

// stepTracker times, from the bench's own watches, each StatefulSet step of a scale-in: when a
// step has rolled out (as the operator's machine defines it: the controller observed the spec,
// every replica updated and ready, and no Pod above the size left, terminating or not) and when
// the operator's next write of spec.replicas shows up. Both ends are watch events on the same
// connection, so the watch's own delay mostly cancels out.
type stepTracker struct {
	mu       sync.Mutex
	w        *watchers
	ns       string
	armed    bool
	patched  map[string]time.Time
	last     map[string]int32
	rolledAt map[string]time.Time
	sawFirst map[string]bool
	steps    []float64
	first    []float64
}

func newStepTracker(w *watchers, ns string) (*stepTracker, error) {
	t := &stepTracker{w: w, ns: ns, patched: map[string]time.Time{}, last: map[string]int32{},
		rolledAt: map[string]time.Time{}, sawFirst: map[string]bool{}}
	onSts := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if s, ok := obj.(*appsv1.StatefulSet); ok {
			t.evaluate(s.Name)
		}
	}
	onPod := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[events.LabelInstance] != "" {
			t.evaluate(p.Labels[events.LabelInstance])
		}
	}
	if _, err := w.sts.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onSts, UpdateFunc: func(_, n any) { onSts(n) }, DeleteFunc: onSts,
	}); err != nil {
		return nil, err
	}
	if _, err := w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, n any) { onPod(n) }, DeleteFunc: onPod,
	}); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *stepTracker) arm() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = true
	clear(t.rolledAt)
}

func (t *stepTracker) patchedAt(name string, at time.Time) {
	t.mu.Lock()
	t.patched[name] = at
	t.mu.Unlock()
}

func (t *stepTracker) evaluate(name string) {
	now := time.Now()
	obj, ok, _ := t.w.sts.GetStore().GetByKey(t.ns + "/" + name)
	if !ok {
		return
	}
	s := obj.(*appsv1.StatefulSet)
	if s.Spec.Replicas == nil {
		return
	}
	r := *s.Spec.Replicas
	pods, _ := t.w.pods.GetIndexer().ByIndex("instance", name)
	rolled := s.Status.ObservedGeneration >= s.Generation && s.Status.Replicas == r && s.Status.UpdatedReplicas == r &&
		s.Status.ReadyReplicas == r && int32(len(pods)) == r

	t.mu.Lock()
	defer t.mu.Unlock()
	if prev, seen := t.last[name]; seen && t.armed && r < prev {
		if at, ok := t.rolledAt[name]; ok {
			t.steps = append(t.steps, now.Sub(at).Seconds())
		} else if p, ok := t.patched[name]; ok && !t.sawFirst[name] {
			t.first = append(t.first, now.Sub(p).Seconds())
		}
		t.sawFirst[name] = true
		delete(t.rolledAt, name)
	}
	t.last[name] = r
	if _, ok := t.rolledAt[name]; !ok && rolled && t.armed && t.sawFirst[name] {
		t.rolledAt[name] = now
	}
}

// scaleIn: n fleets of 6 members, converged, all asked at once to shrink to 3 (no stabilization
// window): three one-member steps each.
func (b *bench) scaleIn(ctx context.Context) (*scaleInResult, error) {
	n := b.cfg.fleets
	ns, err := b.createNamespace(ctx, "bench-scalein")
	if err != nil {
		return nil, err
	}
	op, err := b.startOperator(ctx, "scalein", ns)
	if err != nil {
		return nil, err
	}
	defer op.stop()
	w, err := b.watch(ctx, ns, true)
	if err != nil {
		return nil, err
	}
	defer w.close()
	fl, err := newFinishLine(w.fleets, fleetConverged)
	if err != nil {
		return nil, err
	}
	tr, err := newStepTracker(w, ns)
	if err != nil {
		return nil, err
	}
	b.logf("scale-in: creating %d fleets of 6 members", n)
	if err := b.createFleets(ctx, ns, 0, n, 6); err != nil {
		return nil, err
	}
	if _, err := fl.wait(ctx, n, runTimeout(2*n)); err != nil {
		return nil, fmt.Errorf("fleets of 6 not converged (operator log %s): %w", op.LogPath, err)
	}
	m0, err := op.scrape()
	if err != nil {
		return nil, err
	}
	api0, apiErr := b.cl.operatorRequests(ctx)
	fl.rearm(func(obj any) bool {
		f, ok := obj.(*v1alpha1.CelldFleet)
		return ok && f.Spec.Members == 3 && fleetConverged(obj)
	})
	tr.arm()
	b.logf("scale-in: shrinking %d fleets 6 -> 3 at once", n)
	start := time.Now()
	err = parallel(n, func(i int) error {
		name := fleetName(i)
		tr.patchedAt(name, time.Now())
		_, err := b.cl.celld.CelldV1alpha1().CelldFleets(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"spec":{"members":3}}`), metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	last, err := fl.wait(ctx, n, runTimeout(3*n))
	if err != nil {
		return nil, fmt.Errorf("fleets not shrunk (operator log %s): %w", op.LogPath, err)
	}
	m1, err := op.scrape()
	if err != nil {
		return nil, err
	}
	api1, err := b.cl.operatorRequests(ctx)
	if apiErr == nil {
		apiErr = err
	}
	tr.mu.Lock()
	res := &scaleInResult{fleets: n, total: last.Sub(start), steps: append([]float64(nil), tr.steps...),
		first: append([]float64(nil), tr.first...)}
	tr.mu.Unlock()
	res.decision = m1.histogram("celld_operator_decision_duration_seconds").sub(m0.histogram("celld_operator_decision_duration_seconds"))
	res.e2a = m1.histogram("celld_operator_event_to_action_seconds").sub(m0.histogram("celld_operator_event_to_action_seconds"))
	res.queueWait = m1.histogram("workqueue_queue_duration_seconds").sub(m0.histogram("workqueue_queue_duration_seconds"))
	res.work = m1.histogram("workqueue_work_duration_seconds").sub(m0.histogram("workqueue_work_duration_seconds"))
	res.failed = testenv.Delta(failedActions(m1), failedActions(m0))
	res.writes = testenv.Delta(m1.series("celld_operator_api_writes_total"), m0.series("celld_operator_api_writes_total"))
	if res.apiErr = apiErr; apiErr == nil {
		res.api = api1.sub(api0)
	}
	b.logf("scale-in: %s, %d step samples", res.total.Round(time.Millisecond), len(res.steps))
	if err := b.deleteNamespace(ctx, ns, runTimeout(2*n)); err != nil {
		return nil, err
	}
	return res, nil
}

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
	op, err := b.startOperator(ctx, "steady", ns, "--resync-period", b.cfg.resync.String())
	if err != nil {
		return nil, err
	}
	defer op.stop()
	w, err := b.watch(ctx, ns, false)
	if err != nil {
		return nil, err
	}
	defer w.close()
	fl, err := newFinishLine(w.fleets, fleetConverged)
	if err != nil {
		return nil, err
	}
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
		ml := memLevel{fleets: level}
		for range 3 {
			time.Sleep(2 * time.Second)
			s, err := op.memory()
			if err != nil {
				return nil, err
			}
			ml.samples = append(ml.samples, s)
			c, ci, err := b.cachedBytes(ctx, ns)
			if err != nil {
				return nil, err
			}
			ml.cached = append(ml.cached, c)
			ml.cachedInuse = append(ml.cachedInuse, ci)
		}
		b.logf("memory: %d fleets: heap in use %s, RSS %s, cached objects ~%s", level,
			bytesStr(median(pick(ml.samples, func(s memSample) float64 { return s.heapInuse }))),
			bytesStr(median(pick(ml.samples, func(s memSample) float64 { return s.rss }))), bytesStr(median(ml.cached)))
		res.levels = append(res.levels, ml)
	}

	b.logf("writes at rest: %d converged fleets, %s window, resync every %s", have, b.cfg.restWindow, b.cfg.resync)
	if res.rest, err = b.atRest(ctx, op, have); err != nil {
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

// quiet waits until the operator's write counter has not moved for d (at most five minutes): the
// status write that shows a fleet converged is itself a write, and Events are sent in the
// background.
func (b *bench) quiet(ctx context.Context, op *operator, d time.Duration) error {
	last, _, err := op.writes()
	if err != nil {
		return err
	}
	since := time.Now()
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		n, _, err := op.writes()
		if err != nil {
			return false, err
		}
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= d, nil
	})
}

func (b *bench) atRest(ctx context.Context, op *operator, fleets int) (*restResult, error) {
	if err := b.quiet(ctx, op, 5*time.Second); err != nil {
		return nil, err
	}
	res := &restResult{fleets: fleets, window: b.cfg.restWindow}
	m0, err := op.scrape()
	if err != nil {
		return nil, err
	}
	api0, apiErr := b.cl.operatorRequests(ctx)
	time.Sleep(b.cfg.restWindow)
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
	logFrom := op.logOffset()

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
		failLogs: []logSpan{{op.LogPath, logFrom, op.logOffset()}}}
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
// informers watch (same namespaces, same label selectors, managedFields dropped as its transform
// does), decoded into the same Go types in this process, measured as the growth of the live heap.
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
		dropManagedFields(l)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc), float64(after.HeapInuse) - float64(before.HeapInuse), nil
}

// dropManagedFields does to a list what the operator's informer transform does to each object.
func dropManagedFields(list any) {
	obj, ok := list.(kruntime.Object)
	if !ok {
		return
	}
	// ExtractList gives the items in place, so clearing them clears the list's.
	items, err := apimeta.ExtractList(obj)
	if err != nil {
		return
	}
	for _, it := range items {
		if m, err := apimeta.Accessor(it); err == nil {
			m.SetManagedFields(nil)
		}
	}
}

// --- helpers -------------------------------------------------------------------------------------

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minMax(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// percentile of raw samples, nearest rank.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func pick[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

func bytesStr(v float64) string {
	switch a := v; {
	case a >= 1<<30 || a <= -(1<<30):
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case a >= 1<<20 || a <= -(1<<20):
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 1<<10 || a <= -(1<<10):
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}
