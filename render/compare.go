package render

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Matches reports whether an observed object already holds every field the desired object sets:
// the test server-side apply would pass without changing anything. Fields the API server or other
// controllers add (defaults, status, other managers' fields) do not count, so a converged fleet
// costs no write, while a hand edit of a field the operator sets is drift and is repaired.
func Matches(desired, observed any) bool {
	if observed == nil {
		return false
	}
	d, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false
	}
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(observed)
	if err != nil {
		return false
	}
	// Informer caches hand objects out without apiVersion and kind; the type already says both.
	delete(d, "status")
	delete(d, "apiVersion")
	delete(d, "kind")
	if _, policy := desired.(*networkingv1.NetworkPolicy); policy {
		// In a NetworkPolicy an empty selector selects everything and a missing one nothing, and
		// a key added beside the operator's (a namespaceSelector next to its podSelector) widens
		// what it allows: neither reads as drift to the subset test. The API server defaults
		// nothing in a policy's spec that the operator leaves out, so the spec compares whole.
		return reflect.DeepEqual(d["spec"], o["spec"])
	}
	return subset(d, o) && noneLeftOver(d, o)
}

// userOnly are the fields of a member's Pod template that only the fleet's spec sets (spec.pod,
// spec.placement): neither the API server nor Kubernetes' controllers default them. Where the desired template leaves one out, the
// observed one must too: otherwise a setting the user removed would stay on the members, as the
// subset test alone cannot tell a removed field from a defaulted one.
var userOnly = struct{ spec, security, container []string }{
	spec:      []string{"initContainers", "imagePullSecrets", "priorityClassName", "nodeSelector", "tolerations", "affinity"},
	security:  []string{"runAsUser", "runAsGroup", "supplementalGroups"},
	container: []string{"env", "envFrom", "command", "args", "volumeMounts"},
}

func noneLeftOver(d, o map[string]any) bool {
	ds, _, _ := unstructured.NestedMap(d, "spec", "template", "spec")
	os, _, _ := unstructured.NestedMap(o, "spec", "template", "spec")
	if ds == nil || os == nil {
		return true
	}
	left := func(d, o map[string]any, keys []string) bool {
		for _, k := range keys {
			if _, set := d[k]; !set && !empty(o[k]) {
				return true
			}
		}
		return false
	}
	if left(ds, os, userOnly.spec) {
		return false
	}
	dsc, _, _ := unstructured.NestedMap(ds, "securityContext")
	osc, _, _ := unstructured.NestedMap(os, "securityContext")
	if left(dsc, osc, userOnly.security) {
		return false
	}
	for _, list := range []string{"containers", "initContainers"} {
		dc, _, _ := unstructured.NestedSlice(ds, list)
		oc, _, _ := unstructured.NestedSlice(os, list)
		for i := range min(len(dc), len(oc)) {
			dm, _ := dc[i].(map[string]any)
			om, _ := oc[i].(map[string]any)
			if left(dm, om, userOnly.container) {
				return false
			}
		}
	}
	return true
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func subset(d, o any) bool {
	switch dv := d.(type) {
	case map[string]any:
		ov, ok := o.(map[string]any)
		if !ok {
			return len(dv) == 0 && o == nil
		}
		for k, x := range dv {
			if x == nil {
				// An unset timestamp (creationTimestamp: null) sets nothing.
				continue
			}
			if !subset(x, ov[k]) {
				return false
			}
		}
		return true
	case []any:
		ov, ok := o.([]any)
		if !ok || len(ov) != len(dv) {
			return len(dv) == 0 && o == nil
		}
		for i := range dv {
			if !subset(dv[i], ov[i]) {
				return false
			}
		}
		return true
	default:
		return d == o
	}
}

// TemplateMatches reports whether the observed StatefulSet runs the desired Pod template, by the
// same test as Matches: a change of the template is a new revision for its members, which a
// staged rollout holds at its partition (the rest of the object moves no member).
func TemplateMatches(desired, observed *appsv1.StatefulSet) bool {
	type spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	}
	type object struct {
		Spec spec `json:"spec"`
	}
	return Matches(&object{spec{desired.Spec.Template}}, &object{spec{observed.Spec.Template}})
}

// SetPartition sets a rendered StatefulSet's rollingUpdate partition: members from that ordinal
// up get the update revision, the ones below keep theirs.
func SetPartition(s *appsv1.StatefulSet, partition int32) {
	if s == nil {
		return
	}
	s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition}
}
