package sim

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

func TestReapplyingTheSameObjectsWritesNothing(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	objs := append(prerequisites(f), statefulSet(f, 3, "celld:v1"))
	for _, o := range objs {
		apply(t, c, o)
	}
	runFor(c, 3*time.Minute)
	mustEqual(t, "writes after the first apply", len(c.Writes()), len(objs))
	rv := map[string]string{}
	for _, o := range objs {
		k := mustKind(o)
		rv[string(k)+o.(object).GetName()] = c.get(k, ns, o.(object).GetName()).GetResourceVersion()
	}
	c.Drain()

	// The fixtures are not defaulted and the Services carry no cluster IP: the server's
	// defaults and allocations must not read as changes.
	for _, o := range append(prerequisites(f), statefulSet(f, 3, "celld:v1")) {
		apply(t, c, o)
	}
	mustEqual(t, "writes after re-applying", len(c.Writes()), len(objs))
	mustEqual(t, "requests", len(c.Requests()), 2*len(objs))
	for _, o := range objs {
		k := mustKind(o)
		mustEqual(t, string(k)+" resourceVersion", c.get(k, ns, o.(object).GetName()).GetResourceVersion(), rv[string(k)+o.(object).GetName()])
	}
	if evs := c.Drain(); len(evs) != 0 {
		t.Fatalf("re-apply emitted %d events, first %s", len(evs), evs[0].Kind)
	}
}

func TestApplyBumpsGenerationOnlyForSpecChanges(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	s := c.StatefulSet(ns, "alpha")
	mustEqual(t, "generation", s.Generation, int64(1))
	mustEqual(t, "defaulted pod management", s.Spec.PodManagementPolicy, appsv1.OrderedReadyPodManagement)
	mustEqual(t, "defaulted grace", *s.Spec.Template.Spec.TerminationGracePeriodSeconds, int64(30))
	if s.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Fatal("type RollingUpdate alone got a rollingUpdate block; the API server leaves it nil")
	}
	if s.APIVersion != "" || s.Kind != "" {
		t.Fatalf("stored object carries TypeMeta %s/%s; informers hand objects out without it", s.APIVersion, s.Kind)
	}

	annotated := statefulSet(f, 3, "celld:v1")
	annotated.Annotations = map[string]string{"celld.io/provisioned": "true"}
	apply(t, c, annotated)
	s2 := c.StatefulSet(ns, "alpha")
	mustEqual(t, "generation after an annotation", s2.Generation, int64(1))
	if s2.ResourceVersion == s.ResourceVersion {
		t.Fatal("annotation change kept the resourceVersion")
	}

	scaled := statefulSet(f, 4, "celld:v1")
	scaled.Annotations = annotated.Annotations
	apply(t, c, scaled)
	mustEqual(t, "generation after a replicas change", c.StatefulSet(ns, "alpha").Generation, int64(2))
	mustEqual(t, "status untouched by apply", c.StatefulSet(ns, "alpha").Status.ObservedGeneration, int64(0))
}

func TestApplyRefusesWhatTheAPIServerRefuses(t *testing.T) {
	c := newCluster(t, 3, Options{})
	f := newFleet(t, c, "alpha", v1alpha1.ProfilePersistentFleet)
	apply(t, c, statefulSet(f, 3, "celld:v1"))

	bigger := statefulSet(f, 3, "celld:v1")
	bigger.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("20Gi")
	if err := c.Do(machine.Action{Kind: machine.Apply, Key: "k", Ref: kinds.Ref{Namespace: ns}, Object: bigger}); !apierrors.IsInvalid(err) {
		t.Fatalf("changing volumeClaimTemplates: err %v, want Invalid", err)
	}

	wrongSelector := statefulSet(f, 3, "celld:v1")
	wrongSelector.Spec.Template.Labels = map[string]string{"x": "y"}
	if err := c.Do(machine.Action{Kind: machine.Apply, Key: "k", Ref: kinds.Ref{Namespace: ns}, Object: wrongSelector}); !apierrors.IsInvalid(err) {
		t.Fatalf("selector not matching the template: err %v, want Invalid", err)
	}
	mustEqual(t, "writes", len(c.Writes()), 1)
}

func TestNoDefaultsStoresExactlyWhatWasApplied(t *testing.T) {
	c := newCluster(t, 3, Options{NoDefaults: true})
	f := newFleet(t, c, "alpha", v1alpha1.ProfileBucket)
	apply(t, c, statefulSet(f, 3, "celld:v1"))
	s := c.StatefulSet(ns, "alpha")
	mustEqual(t, "pod management", s.Spec.PodManagementPolicy, appsv1.PodManagementPolicyType(""))
	runFor(c, 3*time.Minute)
	mustEqual(t, "ready", readyCount(memberPods(c, f)), 3)
}
