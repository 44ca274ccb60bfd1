package sim

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// The Eviction API as a drain meets it: with every member Ready the budget (maxUnavailable 1)
// lets one go and refuses the next until the first is back and Ready; an evicted member carries
// the DisruptionTarget condition of the Eviction API and leaves gracefully; a member that is not
// Ready goes while the others are all Ready (IfHealthyBudget), not while another is away, and
// always under AlwaysAllow; a cordoned node takes no new Pod.
func TestEvictionFollowsTheBudget(t *testing.T) {
	c, f := persistentFleetOnFourNodes(t, Options{})
	for _, o := range prerequisites(f) {
		apply(t, c, o)
	}
	must(t, c.Cordon("n1", true))
	ok, err := c.Evict(ns, "alpha-0")
	must(t, err)
	mustEqual(t, "alpha-0 evicted, all Ready", ok, true)
	p := c.Pod(ns, "alpha-0")
	mustEqual(t, "alpha-0 terminating", p.DeletionTimestamp != nil, true)
	reason := ""
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget && cond.Status == corev1.ConditionTrue {
			reason = cond.Reason
		}
	}
	mustEqual(t, "alpha-0 DisruptionTarget reason", reason, "EvictionByEvictionAPI")
	ok, err = c.Evict(ns, "alpha-1")
	must(t, err)
	mustEqual(t, "alpha-1 evicted while alpha-0 is away", ok, false)
	mustEqual(t, "alpha-1 kept", c.Pod(ns, "alpha-1").DeletionTimestamp == nil, true)

	runFor(c, 3*time.Minute)
	back := c.Pod(ns, "alpha-0")
	if back == nil || back.UID == p.UID || back.Spec.NodeName == "n1" || !podReady(back) {
		t.Fatalf("alpha-0 not back, Ready, on an uncordoned node: %+v", back)
	}
	ok, err = c.Evict(ns, "alpha-1")
	must(t, err)
	mustEqual(t, "alpha-1 evicted once alpha-0 is back", ok, true)
	runFor(c, 3*time.Minute)
	mustEqual(t, "ready", readyCount(memberPods(c, f)), 3)

	// Not Ready: goes while every other member is Ready, not while another is away.
	must(t, c.Cordon("n1", false))
	crashed := c.Pod(ns, "alpha-2")
	next := crashed.DeepCopy()
	setPodCondition(next, corev1.PodReady, false, c.now)
	c.put(next)
	ok, err = c.Evict(ns, "alpha-2")
	must(t, err)
	mustEqual(t, "not-Ready alpha-2 evicted, the others Ready", ok, true)
	runFor(c, 3*time.Minute)
	for _, name := range []string{"alpha-0", "alpha-1"} {
		next := c.Pod(ns, name).DeepCopy()
		setPodCondition(next, corev1.PodReady, false, c.now)
		c.put(next)
		ok, err = c.Evict(ns, name)
		must(t, err)
		mustEqual(t, name+" not Ready evicted while another is not Ready", ok, name == "alpha-0")
	}
	pdb := c.get(KindPDB, ns, f.Name).(*policyv1.PodDisruptionBudget).DeepCopy()
	always := policyv1.AlwaysAllow
	pdb.Spec.UnhealthyPodEvictionPolicy = &always
	c.put(pdb)
	ok, err = c.Evict(ns, "alpha-1")
	must(t, err)
	mustEqual(t, "not-Ready alpha-1 evicted under AlwaysAllow", ok, true)
}

// The budget counts the workload's scale, not the Pods there are: a member missing counts as
// away, so with one of three not created yet, no Ready member goes.
func TestEvictionCountsTheMissingMember(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "beta", v1alpha1.ProfileBucket)
	for _, o := range prerequisites(f) {
		apply(t, c, o)
	}
	apply(t, c, deployment(f, 2, "celld:v1"))
	runFor(c, 3*time.Minute)
	mustEqual(t, "ready", readyCount(memberPods(c, f)), 2)
	apply(t, c, deployment(f, 3, "celld:v1"))
	c.Settle()
	var ready []string
	for _, p := range sortedPods(memberPods(c, f)) {
		if podReady(p) {
			ready = append(ready, p.Name)
		}
	}
	if len(ready) != 2 {
		t.Fatalf("%d members Ready right after the scale to 3; want the 2 there were", len(ready))
	}
	ok, err := c.Evict(ns, ready[0])
	must(t, err)
	mustEqual(t, "a Ready member evicted with the third not Ready yet", ok, false)
}
