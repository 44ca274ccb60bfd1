package render

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// The operator owns these name spaces in a member's Pod: what it sets there now, and what a
// later version may set, so a user's setting never takes a name the operator will need.
const (
	reservedEnvPrefix = "CELLD_"
	reservedKeyPrefix = "celld.io/"
)

// Overridden lists the user's Pod settings (spec.pod) that name what the operator sets itself,
// as "spec.pod.<field> <name>", sorted: these are not used, the operator's values are.
func Overridden(f *v1alpha1.CelldFleet) []string {
	var out []string
	own := objectLabels(f, "member")
	for k := range f.Spec.Pod.Labels {
		if _, taken := own[k]; taken || strings.HasPrefix(k, reservedKeyPrefix) {
			out = append(out, "spec.pod.labels "+k)
		}
	}
	for k := range f.Spec.Pod.Annotations {
		if strings.HasPrefix(k, reservedKeyPrefix) {
			out = append(out, "spec.pod.annotations "+k)
		}
	}
	for _, e := range f.Spec.Pod.Env {
		if strings.HasPrefix(e.Name, reservedEnvPrefix) {
			out = append(out, "spec.pod.env "+e.Name)
		}
	}
	sort.Strings(out)
	return out
}

// podLabels are the user's labels under the operator's: the operator's win, so a member always
// matches its workload's selector.
func podLabels(f *v1alpha1.CelldFleet) map[string]string {
	l := objectLabels(f, "member")
	for k, v := range f.Spec.Pod.Labels {
		if _, taken := l[k]; !taken && !strings.HasPrefix(k, reservedKeyPrefix) {
			l[k] = string(v)
		}
	}
	return l
}

// podAnnotations are the user's annotations and the operator's restart stamp; nil when neither
// is set, so a fleet without them renders what it always did.
func podAnnotations(f *v1alpha1.CelldFleet) map[string]string {
	var a map[string]string
	for k, v := range f.Spec.Pod.Annotations {
		if strings.HasPrefix(k, reservedKeyPrefix) {
			continue
		}
		if a == nil {
			a = map[string]string{}
		}
		a[k] = string(v)
	}
	if at := f.Annotations[v1alpha1.AnnotationRestartedAt]; at != "" {
		// A new template is a rollout: the workload's controller replaces the members one at a
		// time, as for a new image.
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.AnnotationRestartedAt] = at
	}
	return a
}

// userEnv follows the operator's variables, so a user's value may refer to one of them as
// $(CELLD_FLEET_NAME).
func userEnv(f *v1alpha1.CelldFleet) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range f.Spec.Pod.Env {
		if strings.HasPrefix(e.Name, reservedEnvPrefix) {
			continue
		}
		v := corev1.EnvVar{Name: e.Name, Value: e.Value}
		if s := e.ValueFrom; s != nil {
			v.ValueFrom = &corev1.EnvVarSource{}
			if r := s.SecretKeyRef; r != nil {
				v.ValueFrom.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Key: r.Key, Optional: r.Optional}
			}
			if r := s.ConfigMapKeyRef; r != nil {
				v.ValueFrom.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: r.Name}, Key: r.Key, Optional: r.Optional}
			}
		}
		out = append(out, v)
	}
	return out
}

func pullSecrets(f *v1alpha1.CelldFleet) []corev1.LocalObjectReference {
	if len(f.Spec.Pod.ImagePullSecrets) == 0 {
		return nil
	}
	out := make([]corev1.LocalObjectReference, len(f.Spec.Pod.ImagePullSecrets))
	for i, s := range f.Spec.Pod.ImagePullSecrets {
		out[i] = corev1.LocalObjectReference{Name: s.Name}
	}
	return out
}
