package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/testenv"
	"github.com/celld/celld-operator/kinds"
)

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
	statusLag histogram
	// traced: each step joined to the operator's log line of its write (nil when none was read)
	traced []stepBreakdown
	failed map[string]float64
	writes map[string]float64 // the operator's writes in the walk, by verb and resource
	api    operatorRequests   // the API server's count of the operator's requests in the walk
	apiErr error
	// movingUnlimited: the operator ran the client that moves fleets without a limiter.
	movingUnlimited bool
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
	samples  []stepSample
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
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[kinds.LabelInstance] != "" {
			t.evaluate(p.Labels[kinds.LabelInstance])
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
			t.samples = append(t.samples, stepSample{fleet: name, replicas: r, rolled: at, seen: now})
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
	ph, err := b.startPhase(ctx, "scalein", ns, true)
	if err != nil {
		return nil, err
	}
	defer ph.close()
	op, w, fl := ph.op, ph.w, ph.fl
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
	logFrom := op.LogOffset()
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
		first: append([]float64(nil), tr.first...), movingUnlimited: op.movingUnlimited()}
	samples := append([]stepSample(nil), tr.samples...)
	tr.mu.Unlock()
	res.traced = breakdowns(samples, workloadApplies([]logSpan{{op.LogPath, logFrom, op.LogOffset()}}))
	res.decision = m1.histogram("celld_operator_decision_duration_seconds").sub(m0.histogram("celld_operator_decision_duration_seconds"))
	res.e2a = m1.histogram("celld_operator_event_to_action_seconds").sub(m0.histogram("celld_operator_event_to_action_seconds"))
	res.queueWait = m1.histogram("workqueue_queue_duration_seconds").sub(m0.histogram("workqueue_queue_duration_seconds"))
	res.work = m1.histogram("workqueue_work_duration_seconds").sub(m0.histogram("workqueue_work_duration_seconds"))
	res.statusLag = m1.histogram("celld_operator_status_write_lag_seconds").sub(m0.histogram("celld_operator_status_write_lag_seconds"))
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

// steps is "1 step" or "n steps".
func steps(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}

// stepTargets are the p99 step latencies the operator is held to, by how many fleets scale in at
// once; other counts have none.
var stepTargets = map[int]float64{50: 1, 500: 3}

// stepTarget is the target column and the verdict for a p99 step latency, in seconds, at this
// many fleets.
func stepTarget(fleets int, p99 float64) (target, verdict string) {
	want, ok := stepTargets[fleets]
	if !ok {
		return "(no target)", ""
	}
	target = "p99 ≤ " + durStr(want)
	if p99 <= want {
		return target, "met"
	}
	return target, "missed: p99 " + durStr(p99)
}

// section is what the scale-in walk puts in the report.
func (s *scaleInResult) section() section {
	var sec section
	sec.add("3", fmt.Sprintf("scale-in: %d fleets 6 -> 3 at once (3 one-member steps each), until all Ready at 3", s.fleets),
		fmt.Sprintf("%.1f s", s.total.Seconds()), "", "")
	target, verdict := stepTarget(s.fleets, percentile(s.steps, 0.99))
	sec.add("3", "scale-in: decision latency, a step rolled out -> the next replicas write (bench's watches)",
		fmt.Sprintf("p50 %s, p99 %s, max %s (%d steps)", durStr(percentile(s.steps, 0.5)), durStr(percentile(s.steps, 0.99)), durStr(maxOf(s.steps)), len(s.steps)),
		target, verdict)
	if len(s.traced) > 0 {
		slow := slowest(s.traced, 0.9)
		sec.add("3", fmt.Sprintf("scale-in: where the slowest steps' time went (the slowest 10%%: %s of %s or more; "+
			"the operator's line of each step's write joined to the bench's watches)", steps(len(slow)), durStr(slow[len(slow)-1].seconds())),
			shares(slow), "", "")
		var lines []string
		for _, b := range slow[:min(5, len(slow))] {
			lines = append(lines, b.describe())
		}
		sec.note("**Scale-in: the slowest steps, one by one** (from the step rolled out, as the bench's watches saw it, to its "+
			"next replicas write seen there; the parts in between from the operator's log line of that write): %s.", strings.Join(lines, "; "))
	}
	sec.add("3", "scale-in: spec change -> the first replicas write",
		fmt.Sprintf("p50 %s, p99 %s (%d fleets)", durStr(percentile(s.first, 0.5)), durStr(percentile(s.first, 0.99)), len(s.first)), "(no target)", "")
	if s.decision.total > 0 {
		sec.add("3", "scale-in: decision duration (operator histogram)",
			fmt.Sprintf("p50 %s, p99 %s (%d syncs)", q(s.decision, 0.5), q(s.decision, 0.99), int(s.decision.total)), "(no target)", "")
	}
	if s.queueWait.total > 0 {
		sec.add("3", "scale-in: the operator's workqueue, wait in queue / sync duration",
			fmt.Sprintf("wait p50 %s, p99 %s; sync p50 %s, p99 %s (%d syncs)", q(s.queueWait, 0.5), q(s.queueWait, 0.99),
				q(s.work, 0.5), q(s.work, 0.99), int(s.work.total)), "(no target)", "")
	}
	if s.statusLag.total > 0 {
		sec.add("3", "scale-in: status lag, a sync handing a status over -> its write answered (operator histogram)",
			fmt.Sprintf("p50 %s, p99 %s (%d writes)", q(s.statusLag, 0.5), q(s.statusLag, 0.99), int(s.statusLag.total)), "(no target)", "")
	}
	k := float64(max(s.fleets, 1))
	moving, status, events := byClient(s.writes, k)
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
	sec.add("3", "scale-in: the operator's requests per fleet",
		fmt.Sprintf("%s writes (%s) %s%s", trim(moving+status+events), seriesPer(s.writes, k), reads, failed), "", "")
	dec, _, _ := s.decision.quantile(0.5)
	work, _, _ := s.work.quantile(0.5)
	if s.total.Seconds() > 0 && work > 10*dec {
		// A limiter bounds the walk when the requests beyond its burst ran at close to its rate;
		// each client has its own, and every read goes through the one that moves fleets.
		rateOf := func(perFleet float64) float64 {
			return max(0, float64(s.fleets)*perFleet-operatorBurst) / s.total.Seconds()
		}
		movingRate, statusRate := rateOf(moving+celldR+kubeR), rateOf(status)
		why := fmt.Sprintf("Its requests beyond each limiter's burst ran at %.1f/s (the client that moves fleets) and "+
			"%.1f/s (status), both under the %g QPS limit: the time a sync takes is its requests' round trips to a loaded "+
			"API server.", movingRate, statusRate, operatorQPS)
		bound := func(client, requests string, rate float64) string {
			return fmt.Sprintf("Its %s requests (%s) beyond the limiter's burst ran at %.1f/s against the %g QPS limit: "+
				"the workers wait their turns at that limiter, so a sync of a few requests takes hundreds of milliseconds and a "+
				"fleet waits in the queue behind the others' syncs; the latency seen from the watches is that queueing.", client, requests, rate, operatorQPS)
		}
		switch {
		case s.movingUnlimited:
			why = fmt.Sprintf("The client that moves fleets ran without a client-side limit (the API server runs "+
				"priority and fairness) and the status client's writes beyond its burst ran at %.1f/s against its %g QPS: "+
				"no limiter bounds the walk. The tail is the queue: when a wave of steps lands, each sync waits for its "+
				"writes (the history, then the replicas; the status goes apart, to the status writers) to be committed by an API server and etcd that share this "+
				"machine's cores with kube-controller-manager, kwok and the bench, and the fleets behind them wait for a worker "+
				"(queue wait p99 %s, sync p99 %s).", statusRate, operatorQPS, q(s.queueWait, 0.99), q(s.work, 0.99))
		case movingRate >= 0.8*operatorQPS:
			why = bound("fleet-moving", "the StatefulSet applies, and the fresh reads each step's premise makes: the members, the node of each, the fleet, the workload", movingRate)
		case statusRate >= 0.8*operatorQPS:
			why = bound("status", "the fleets' status and the reservations' history", statusRate)
		}
		sec.note("**Scale-in: the decision takes microseconds, the step takes longer.** The machine decides in %s "+
			"(p50), a sync lasts %s (p50) and a fleet waits %s (p50) in the queue; a step, from rolled out to the next "+
			"replicas write, takes %s (p50) as the watches see it. The walk made %.1f requests per fleet on the client "+
			"that moves fleets and %.1f status writes per fleet in %.1f s. %s",
			q(s.decision, 0.5), q(s.work, 0.5), q(s.queueWait, 0.5), durStr(percentile(s.steps, 0.5)), moving+celldR+kubeR, status,
			s.total.Seconds(), why)
	}
	return sec
}
