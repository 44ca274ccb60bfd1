package realnodes

import (
	"context"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/render"
)

// hungWindow is what a fleet's disruption budget saw of one member whose celld stopped answering
// (SIGSTOP: the process lives, its probes time out).
type hungWindow struct {
	fleet string
	// notReady is when the API server first showed the member not Ready, budget when the
	// fleet's budget first allowed no disruption, both from the stop.
	notReady, budget time.Duration
	// allowedAfter: a dry-run eviction of another member of the fleet, asked this long after
	// the stop, was allowed by the budget: a drain then would have taken a second member.
	allowedAfter time.Duration
	allowed      bool
}

// TestReadinessWindowOnRealNodes measures, on real kubelets, how long a member whose celld hangs
// is still counted Ready by its fleet's disruption budget, with Kubernetes' probe timing, with the
// default the chart's admission policy gives a new fleet, and with a fleet's spec.readiness, and
// shows what the window lets a drain do: 8 s after the hang (inside
// the default window, outside the tuned one) a dry-run eviction of a second member of the fleet is
// allowed on Kubernetes' timing and refused on the tuned one.
func TestReadinessWindowOnRealNodes(t *testing.T) {
	f := newFixture(t)
	tuned := f.newFleet("tuned", v1alpha1.ProfilePersistentFleet, 3)
	tuned.Spec.Readiness = &v1alpha1.ReadinessSpec{PeriodSeconds: ptr.To[int32](1), FailureThreshold: ptr.To[int32](2), TimeoutSeconds: ptr.To[int32](1)}
	plain := f.newFleet("plain", v1alpha1.ProfilePersistentFleet, 3)
	plain.Spec.Readiness = kubernetesReadiness()
	// Nothing named: the chart's MutatingAdmissionPolicy gives it the default timing on create.
	byDefault := f.newFleet("default", v1alpha1.ProfilePersistentFleet, 3)
	fleets := []*v1alpha1.CelldFleet{f.create(tuned), f.create(plain), f.create(byDefault)}
	wantDefault := &v1alpha1.ReadinessSpec{PeriodSeconds: ptr.To[int32](2), FailureThreshold: ptr.To[int32](3), TimeoutSeconds: ptr.To[int32](1)}
	if got := fleets[2].Spec.Readiness; !reflect.DeepEqual(got, wantDefault) {
		t.Errorf("fleet default was stored with spec.readiness %+v, want the chart's default %+v", got, wantDefault)
	}
	for _, fl := range fleets {
		f.waitConverged(fl.Name)
	}
	// The probe each fleet's members run, as their Pods have it.
	bound := map[string]time.Duration{}
	for _, fl := range fleets {
		p := f.members(fl)[0].Spec.Containers[0].ReadinessProbe
		bound[fl.Name] = time.Duration(render.ReadinessWindow(p)) * time.Second
		t.Logf("fleet %s: probe every %ds, %d failures, %ds timeout: window %s by the probe's arithmetic",
			fl.Name, p.PeriodSeconds, p.FailureThreshold, p.TimeoutSeconds, bound[fl.Name])
	}

	// Past the tuned window (about 3 s, and the slack), well inside Kubernetes' (about 31 s).
	probeAt := 8 * time.Second
	var wg sync.WaitGroup
	results := make([]hungWindow, len(fleets))
	for i, fl := range fleets {
		wg.Go(func() { results[i] = f.hang(fl, probeAt) })
	}
	wg.Wait()
	for _, r := range results {
		t.Logf("fleet %s: hung member not Ready after %s, budget at 0 after %s; a second member's eviction %s %s after the hang",
			r.fleet, r.notReady.Round(100*time.Millisecond), r.budget.Round(100*time.Millisecond), map[bool]string{true: "allowed", false: "refused"}[r.allowed], r.allowedAfter.Round(100*time.Millisecond))
	}
	// The kubelet's status sync and the disruption controller add their delay to the probe's
	// arithmetic; 3 s covers them on this machine's loaded nodes.
	const slack = 3 * time.Second
	tunedR, plainR, defaultR := results[0], results[1], results[2]
	if defaultR.budget > bound["default"]+slack {
		t.Errorf("fleet default: the budget counted the hung member Ready for %s; want at most %s + %s", defaultR.budget.Round(100*time.Millisecond), bound["default"], slack)
	}
	if plainR.budget <= defaultR.budget {
		t.Errorf("Kubernetes' timing counted the hung member away after %s, the default one after %s", plainR.budget, defaultR.budget)
	}
	if tunedR.budget > bound["tuned"]+slack {
		t.Errorf("fleet tuned: the budget counted the hung member Ready for %s; want at most %s + %s", tunedR.budget.Round(100*time.Millisecond), bound["tuned"], slack)
	}
	if tunedR.allowed {
		t.Errorf("fleet tuned: a second member's eviction was allowed %s after the hang: the window is not closed", tunedR.allowedAfter.Round(100*time.Millisecond))
	}
	// Kubernetes' timing: the window the budget leaves open is real, and a drain's eviction
	// inside it takes a second member. Kept so that the measure above is known to see one.
	if !plainR.allowed {
		t.Errorf("fleet plain: a second member's eviction %s after the hang was refused: on Kubernetes' probe timing (window %s) it should have been allowed; the measure does not see the window",
			plainR.allowedAfter.Round(100*time.Millisecond), bound["plain"])
	}
	if plainR.budget <= tunedR.budget {
		t.Errorf("Kubernetes' timing counted the hung member away after %s, the tuned one after %s", plainR.budget, tunedR.budget)
	}
}

// hang stops one member's celld (SIGSTOP), asks after probeAt for a dry-run eviction of another
// member, waits until both the Pod is not Ready and the budget allows no disruption, and resumes
// the process.
func (f *fixture) hang(fl *v1alpha1.CelldFleet, probeAt time.Duration) hungWindow {
	f.t.Helper()
	members := f.members(fl)
	victim, other := members[1], members[2]
	procs := processes(fl.UID)[victim.Name]
	if len(procs) != 1 {
		f.t.Fatalf("fleet %s: %d celld processes of %s, want 1", fl.Name, len(procs), victim.Name)
	}
	pid := procs[0].pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		f.t.Fatalf("stop %s: %v", victim.Name, err)
	}
	start := time.Now()
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	r := hungWindow{fleet: fl.Name}
	probed := false
	ctx, cancel := context.WithTimeout(f.ctx, 2*time.Minute)
	defer cancel()
	for r.notReady == 0 || r.budget == 0 || !probed {
		if ctx.Err() != nil {
			f.t.Fatalf("fleet %s: member %s hung for 2m: not Ready after %s, budget at 0 after %s (0: never)", fl.Name, victim.Name, r.notReady, r.budget)
		}
		if !probed && time.Since(start) >= probeAt {
			probed = true
			r.allowedAfter = time.Since(start)
			err := suite.kube.CoreV1().Pods(f.ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: other.Name, Namespace: f.ns},
				DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
			switch {
			case err == nil:
				r.allowed = true
			case !apierrors.IsTooManyRequests(err):
				f.t.Fatalf("fleet %s: dry-run eviction of %s: %v", fl.Name, other.Name, err)
			}
		}
		if r.notReady == 0 {
			if p, err := suite.kube.CoreV1().Pods(f.ns).Get(ctx, victim.Name, metav1.GetOptions{}); err == nil && !podReadyNow(p) {
				r.notReady = time.Since(start)
			}
		}
		if r.budget == 0 {
			if b, err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(ctx, fl.Name, metav1.GetOptions{}); err == nil && b.Status.DisruptionsAllowed == 0 {
				r.budget = time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

func podReadyNow(p *corev1.Pod) bool { return p.DeletionTimestamp == nil && podReady(p) }

// kubernetesReadiness is Kubernetes' own probe timing, named in a fleet's spec so that the chart's
// readiness default does not apply.
func kubernetesReadiness() *v1alpha1.ReadinessSpec {
	return &v1alpha1.ReadinessSpec{PeriodSeconds: ptr.To(render.ReadinessPeriodSeconds),
		FailureThreshold: ptr.To(render.ReadinessFailureThreshold), TimeoutSeconds: ptr.To(render.ReadinessTimeoutSeconds)}
}
