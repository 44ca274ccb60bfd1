package realnodes

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// builds names, by member, the build of the one celld process each runs ("" when it runs none or
// several), as the machine shows it.
func builds(fl *v1alpha1.CelldFleet) map[string]string {
	out := map[string]string{}
	for name, ps := range processes(fl.UID) {
		if len(ps) == 1 {
			out[name] = ps[0].build
		} else {
			out[name] = ""
		}
	}
	return out
}

func running(b map[string]string, build string) []string {
	var out []string
	for name, got := range b {
		if got == build {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// waitHeld waits until the fleet's status says its rollout holds, and returns the revision.
func (f *fixture) waitHeld(name string) string {
	f.t.Helper()
	var rev string
	err := wait.PollUntilContextTimeout(f.ctx, poll, converge, true, func(ctx context.Context) (bool, error) {
		fl, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || fl.Status.Rollout == nil || !fl.Status.Rollout.Held {
			return false, nil
		}
		rev = fl.Status.Rollout.Revision
		return true, nil
	})
	if err != nil {
		f.t.Fatalf("fleet %s: rollout not held within %s", name, converge)
	}
	return rev
}

// TestStagedRolloutOnRealNodes: a PersistentFleet of 3 with spec.rollout.canary 1, under the load
// client. A new image reaches only the highest member's process and holds there; approved (the
// annotation kubectl celld rollout approve writes), the others follow one at a time; the next
// change holds again on the canary, and reverted while held, every member runs the previous image.
// No acknowledged write is lost, and the contract judge is silent.
func TestStagedRolloutOnRealNodes(t *testing.T) {
	f := newFixture(t)
	spec := f.newFleet("staged", v1alpha1.ProfilePersistentFleet, 3)
	spec.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 1}
	fl := f.waitConverged(f.create(spec).Name)
	run := f.startLoad(fl)
	waitFor(t, f.ctx, "acknowledged writes on every member", 2*time.Minute, func() bool { return journalLen(run) > 300 })
	pods := f.recordPods()

	checkHeld := func(what, canary, rest string) {
		t.Helper()
		b := builds(fl)
		if got := running(b, canary); strings.Join(got, ",") != fl.Name+"-2" {
			t.Fatalf("%s: members running %s: %v, want only %s-2 (%v)", what, canary, got, fl.Name, b)
		}
		if got := running(b, rest); strings.Join(got, ",") != fl.Name+"-0,"+fl.Name+"-1" {
			t.Fatalf("%s: members running %s: %v, want %s-0 and %s-1 (%v)", what, rest, got, fl.Name, fl.Name, b)
		}
	}

	t.Log("a new image, held on the canary")
	start := time.Now()
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Image = celldImageV2 })
	rev := f.waitHeld(fl.Name)
	waitFor(t, f.ctx, "the canary running v2", converge, func() bool { return len(running(builds(fl), "v2")) == 1 })
	t.Logf("held on revision %s after %s", rev, time.Since(start).Round(100*time.Millisecond))
	checkHeld("held", "v2", "v1")
	time.Sleep(15 * time.Second)
	checkHeld("held, 15s later", "v2", "v1")

	t.Log("approved: the rest, one at a time")
	start = time.Now()
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) {
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		x.Annotations[v1alpha1.AnnotationRolloutApproved] = rev
	})
	waitFor(t, f.ctx, "every member on v2", converge, func() bool { return len(running(builds(fl), "v2")) == 3 })
	fl = f.waitConverged(fl.Name)
	t.Logf("approved rollout completed in %s", time.Since(start).Round(100*time.Millisecond))
	f.checkMembersRun(fl, "v2")

	t.Log("the previous image as the next change: held again, then reverted while held")
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Image = celldImageV1 })
	if next := f.waitHeld(fl.Name); next == rev {
		t.Fatalf("the next change holds on %s, the approved revision", next)
	}
	waitFor(t, f.ctx, "the canary running v1", converge, func() bool { return len(running(builds(fl), "v1")) == 1 })
	checkHeld("the next change held", "v1", "v2")
	f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Image = celldImageV2 })
	waitFor(t, f.ctx, "every member back on v2", converge, func() bool { return len(running(builds(fl), "v2")) == 3 })
	fl = f.waitConverged(fl.Name)
	f.checkMembersRun(fl, "v2")
	if most := mostAwayAtOnce(pods.Events(t), fl.Name, 3); most > 1 {
		t.Errorf("the staged rollouts had %d members away at once, want at most 1", most)
	}

	rep := f.check(fl, run)
	if rep.Checked == 0 || rep.Checked != run.stats.Acked {
		t.Errorf("checked %d writes, the load client had %d acknowledged", rep.Checked, run.stats.Acked)
	}
	if len(rep.Lost) != 0 {
		t.Errorf("%d acknowledged writes lost:\n%s", len(rep.Lost), rep)
	}
	t.Logf("writes: %d acknowledged, %d checked, %d lost", run.stats.Acked, rep.Checked, len(rep.Lost))
	f.deleteFleet(fl.Name)
	f.verify()
}
