package sim

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

func TestDeploymentRollsWithinSurgeAndUnavailability(t *testing.T) {
	c := newCluster(t, 4, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, deployment(f, 3, "celld:v1"))
	runFor(c, time.Minute)
	mustEqual(t, "ready", readyCount(memberPods(c, f)), 3)

	apply(t, c, deployment(f, 3, "celld:v2"))
	for i := 0; i < 100; i++ {
		c.Advance(5 * time.Second)
		for c.Tick() {
			pods := memberPods(c, f)
			live := 0
			for _, p := range pods {
				if !terminating(p) {
					live++
				}
			}
			// maxUnavailable 0, maxSurge 1.
			if r := readyCount(pods); r < 3 {
				t.Fatalf("at %s only %d members ready", c.Now(), r)
			}
			if live > 4 {
				t.Fatalf("at %s %d live members, surge allows 4", c.Now(), live)
			}
		}
	}
	d := c.Deployment(ns, "alpha")
	mustEqual(t, "updated", d.Status.UpdatedReplicas, int32(3))
	mustEqual(t, "replicas", d.Status.Replicas, int32(3))
	mustEqual(t, "ready", d.Status.ReadyReplicas, int32(3))
	mustEqual(t, "observed", d.Status.ObservedGeneration, d.Generation)
	for _, p := range memberPods(c, f) {
		if p.Spec.Containers[0].Image != "celld:v2" {
			t.Fatalf("%s still runs %s", p.Name, p.Spec.Containers[0].Image)
		}
	}
}

func TestDeploymentScaleDownRemovesTheNotReadyMemberFirst(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, deployment(f, 3, "celld:v1"))
	runFor(c, time.Minute)
	crashed := names(memberPods(c, f))[1]
	must(t, c.CrashMember(ns, crashed))
	c.Settle()
	apply(t, c, deployment(f, 2, "celld:v1"))
	c.Tick()
	for _, p := range memberPods(c, f) {
		if terminating(p) != (p.Name == crashed) {
			t.Fatalf("%s terminating=%t; only the crashed %s should be", p.Name, terminating(p), crashed)
		}
	}
	mustEqual(t, "status.replicas excludes terminating", c.Deployment(ns, "alpha").Status.Replicas, int32(2))
}

// TestDeploymentDefaultStrategyStallsWithoutRoomForASurgePod is the real trap of the default
// 25%/25% strategy: with 3 replicas maxUnavailable rounds down to 0, so no old member goes
// before a surge Pod is ready, and with one member per node on 3 nodes the surge Pod never fits.
func TestDeploymentDefaultStrategyStallsWithoutRoomForASurgePod(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	d := deployment(f, 3, "celld:v1")
	d.Spec.Strategy = appsv1.DeploymentStrategy{}
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	d.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: selectorLabels(f)}}}}}
	apply(t, c, d)
	runFor(c, time.Minute)
	mustEqual(t, "ready", readyCount(memberPods(c, f)), 3)

	d2 := d.DeepCopy()
	d2.Spec.Template.Spec.Containers[0].Image = "celld:v2"
	apply(t, c, d2)
	runFor(c, time.Hour)
	st := c.Deployment(ns, "alpha").Status
	mustEqual(t, "updated (the Pending surge Pod)", st.UpdatedReplicas, int32(1))
	mustEqual(t, "ready (all old)", st.ReadyReplicas, int32(3))
	mustEqual(t, "live members", st.Replicas, int32(4))
	pending := 0
	for _, p := range memberPods(c, f) {
		if p.Spec.NodeName == "" {
			pending++
		}
	}
	mustEqual(t, "pending", pending, 1)
}
