package render

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

func TestPodSettingsReachEveryMember(t *testing.T) {
	yes := true
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		f := fleet(profile)
		plain := workloadOf(Render(f, 3, 3))
		f.Spec.Pod = v1alpha1.PodSettings{
			Labels:            map[string]v1alpha1.LabelValue{"team": "storage", "example.com/tier": "gold"},
			Annotations:       map[string]v1alpha1.AnnotationValue{"prometheus.io/scrape": "true"},
			PriorityClassName: "fleet-critical",
			ImagePullSecrets:  []v1alpha1.PullSecret{{Name: "regcred"}, {Name: "mirror"}},
			Env: []v1alpha1.EnvVar{
				{Name: "LOG_LEVEL", Value: "debug"},
				{Name: "TOKEN", ValueFrom: &v1alpha1.EnvSource{SecretKeyRef: &v1alpha1.KeyRef{Name: "s", Key: "token", Optional: &yes}}},
				{Name: "MODE", ValueFrom: &v1alpha1.EnvSource{ConfigMapKeyRef: &v1alpha1.KeyRef{Name: "cm", Key: "mode"}}},
			},
		}
		w := workloadOf(Render(f, 3, 3))
		tpl := templateOf(w)
		if tpl.Labels["team"] != "storage" || tpl.Labels["example.com/tier"] != "gold" {
			t.Errorf("%s: template labels %v lack the user's", profile, tpl.Labels)
		}
		for k, v := range objectLabels(f, "member") {
			if tpl.Labels[k] != v {
				t.Errorf("%s: template label %s=%q, want the operator's %q", profile, k, tpl.Labels[k], v)
			}
		}
		if tpl.Annotations["prometheus.io/scrape"] != "true" {
			t.Errorf("%s: template annotations %v lack the user's", profile, tpl.Annotations)
		}
		if tpl.Spec.PriorityClassName != "fleet-critical" {
			t.Errorf("%s: priorityClassName %q", profile, tpl.Spec.PriorityClassName)
		}
		if got := tpl.Spec.ImagePullSecrets; !slices.Equal(got, []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}}) {
			t.Errorf("%s: imagePullSecrets %v, want regcred then mirror", profile, got)
		}
		c := tpl.Spec.Containers[0]
		e := env(c)
		if e["LOG_LEVEL"].Value != "debug" {
			t.Errorf("%s: LOG_LEVEL %+v", profile, e["LOG_LEVEL"])
		}
		if s := e["TOKEN"].ValueFrom; s == nil || s.SecretKeyRef == nil || s.SecretKeyRef.Name != "s" || s.SecretKeyRef.Key != "token" || s.SecretKeyRef.Optional == nil || !*s.SecretKeyRef.Optional || s.ConfigMapKeyRef != nil {
			t.Errorf("%s: TOKEN %+v, want the key token of Secret s, optional", profile, e["TOKEN"])
		}
		if s := e["MODE"].ValueFrom; s == nil || s.ConfigMapKeyRef == nil || s.ConfigMapKeyRef.Name != "cm" || s.ConfigMapKeyRef.Key != "mode" || s.SecretKeyRef != nil {
			t.Errorf("%s: MODE %+v, want the key mode of ConfigMap cm", profile, e["MODE"])
		}
		// The user's variables come after the operator's, so they may refer to them.
		if i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "LOG_LEVEL" }); i < len(renderEnv(f)) {
			t.Errorf("%s: LOG_LEVEL at %d, before the operator's %d variables", profile, i, len(renderEnv(f)))
		}
		if Matches(w, plain) {
			t.Errorf("%s: a workload rendered without the settings must count as drift", profile)
		}
		if len(Overridden(f)) != 0 {
			t.Errorf("%s: nothing overridden, got %v", profile, Overridden(f))
		}
	}
}

// TestOperatorNamesWin: a user's setting that names what the operator sets is not used, and is
// named; the members keep their selector, their bucket and the restart stamp.
func TestOperatorNamesWin(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		f := fleet(profile)
		f.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: "2026-11-30T18:00:00Z"}
		f.Spec.Pod = v1alpha1.PodSettings{
			Labels: map[string]v1alpha1.LabelValue{
				kinds.LabelInstance: "other", kinds.LabelFleetUID: "x", kinds.LabelComponent: "db",
				"celld.io/future": "x", "team": "storage",
			},
			Annotations: map[string]v1alpha1.AnnotationValue{v1alpha1.AnnotationRestartedAt: "never", "celld.io/paused": "true", "note": "n"},
			Env:         []v1alpha1.EnvVar{{Name: "CELLD_BUCKET_NAME", Value: "stolen"}, {Name: "CELLD_NEW", Value: "x"}, {Name: "celld_lower", Value: "ok"}},
		}
		tpl := templateOf(workloadOf(Render(f, 3, 3)))
		for k, v := range objectLabels(f, "member") {
			if tpl.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want the operator's %q", profile, k, tpl.Labels[k], v)
			}
		}
		if _, ok := tpl.Labels["celld.io/future"]; ok || tpl.Labels["team"] != "storage" {
			t.Errorf("%s: labels %v: want team kept and celld.io/ keys left out", profile, tpl.Labels)
		}
		if tpl.Annotations[v1alpha1.AnnotationRestartedAt] != "2026-11-30T18:00:00Z" || tpl.Annotations["note"] != "n" {
			t.Errorf("%s: annotations %v: want the operator's restart stamp and the user's note", profile, tpl.Annotations)
		}
		if _, ok := tpl.Annotations["celld.io/paused"]; ok {
			t.Errorf("%s: annotations %v carry a celld.io/ key of the user's", profile, tpl.Annotations)
		}
		e := tpl.Spec.Containers[0].Env
		count := map[string]int{}
		for _, v := range e {
			count[v.Name]++
		}
		if count["CELLD_BUCKET_NAME"] != 1 || env(tpl.Spec.Containers[0])["CELLD_BUCKET_NAME"].Value != "bkt" || count["CELLD_NEW"] != 0 || count["celld_lower"] != 1 {
			t.Errorf("%s: env %v: want the operator's CELLD_BUCKET_NAME once, no CELLD_NEW, celld_lower kept", profile, e)
		}
		want := []string{
			"spec.pod.annotations celld.io/paused", "spec.pod.annotations celld.io/restartedAt",
			"spec.pod.env CELLD_BUCKET_NAME", "spec.pod.env CELLD_NEW",
			"spec.pod.labels app.kubernetes.io/component", "spec.pod.labels app.kubernetes.io/instance",
			"spec.pod.labels celld.io/fleet-uid", "spec.pod.labels celld.io/future",
		}
		if got := Overridden(f); !slices.Equal(got, want) {
			t.Errorf("%s: Overridden = %v, want %v", profile, got, want)
		}
	}
}

// TestNoSettingsRendersAsBefore: a fleet without spec.pod renders no empty maps or lists, so the
// workloads of fleets created before spec.pod existed match and cost no write.
func TestNoSettingsRendersAsBefore(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		tpl := templateOf(workloadOf(Render(fleet(profile), 3, 3)))
		if tpl.Annotations != nil || tpl.Spec.ImagePullSecrets != nil || tpl.Spec.PriorityClassName != "" || len(tpl.Spec.Containers[0].Env) != len(renderEnv(fleet(profile))) {
			t.Errorf("%s: template %+v carries settings nobody asked for", profile, tpl)
		}
		c := tpl.Spec.Containers[0]
		if tpl.Spec.InitContainers != nil || c.EnvFrom != nil || len(c.VolumeMounts) != 2 || len(tpl.Spec.Volumes) != map[v1alpha1.Profile]int{v1alpha1.ProfilePersistentFleet: 1, v1alpha1.ProfileBucket: 2}[profile] {
			t.Errorf("%s: template %+v carries volumes, mounts or sidecars nobody asked for", profile, tpl)
		}
		yes := true
		want := &corev1.PodSecurityContext{
			RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			FSGroup: ptrTo(DataGroup), FSGroupChangePolicy: ptrTo(corev1.FSGroupChangeOnRootMismatch),
		}
		if !equality.Semantic.DeepEqual(tpl.Spec.SecurityContext, want) {
			t.Errorf("%s: pod security context %+v, want %+v", profile, tpl.Spec.SecurityContext, want)
		}
	}
}
