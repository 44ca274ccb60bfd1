package render

import (
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
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
	for _, e := range f.Spec.Pod.EnvFrom {
		if strings.HasPrefix(e.Prefix, reservedEnvPrefix) {
			out = append(out, "spec.pod.envFrom prefix "+e.Prefix)
		}
	}
	for _, v := range f.Spec.Pod.Volumes {
		if reservedVolume(v.Name) {
			out = append(out, "spec.pod.volumes "+v.Name)
		}
	}
	for _, m := range f.Spec.Pod.VolumeMounts {
		if reservedVolume(m.Name) || reservedPath(m.MountPath) {
			out = append(out, "spec.pod.volumeMounts "+m.MountPath)
		}
	}
	for _, s := range f.Spec.Pod.Sidecars {
		if reservedContainer(s.Name) {
			out = append(out, "spec.pod.sidecars "+s.Name)
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
	if size := f.Annotations[v1alpha1.AnnotationFilesystemResize]; size != "" {
		// The machine's word that a grown filesystem waits for its members to start again.
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.AnnotationFilesystemResize] = size
	}
	return a
}

// userEnv follows the operator's variables, so a user's value may refer to one of them as
// $(CELLD_FLEET_NAME).
func userEnv(f *v1alpha1.CelldFleet) []corev1.EnvVar {
	var keep []v1alpha1.EnvVar
	for _, e := range f.Spec.Pod.Env {
		if !strings.HasPrefix(e.Name, reservedEnvPrefix) {
			keep = append(keep, e)
		}
	}
	return envVars(keep)
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

// The operator's volume and container names: admission refuses them in spec.pod, and rendering
// drops them too, so that a fleet stored before a name was reserved never loses its members'
// data volume or celld container to one of the user's.
const reservedNamePrefix = "celld-"

func reservedVolume(name string) bool {
	return name == kinds.DataVolume || name == ScratchVolume || strings.HasPrefix(name, reservedNamePrefix)
}

func reservedContainer(name string) bool {
	return name == ContainerName || strings.HasPrefix(name, reservedNamePrefix)
}

// reservedPath: the operator's mount paths and everything below them, so that no user mount
// shadows part of a member's data or scratch space.
func reservedPath(p string) bool {
	p = path.Clean(p)
	for _, own := range []string{DataMountPath, ScratchMountPath} {
		if p == own || strings.HasPrefix(p, own+"/") {
			return true
		}
	}
	return false
}

// podSecurity is the restricted context the operator always renders, with the user's user,
// groups and volume ownership where spec.pod.securityContext sets them.
func podSecurity(f *v1alpha1.CelldFleet) *corev1.PodSecurityContext {
	yes := true
	sc := &corev1.PodSecurityContext{
		RunAsNonRoot:   &yes,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		FSGroup:        ptrTo(DataGroup),
		// A disk already given to the group is not walked again at every start: a large
		// disk would hold its member back for the whole walk.
		FSGroupChangePolicy: ptrTo(corev1.FSGroupChangeOnRootMismatch),
	}
	u := f.Spec.Pod.SecurityContext
	if u == nil {
		return sc
	}
	// Root is never taken from the user: the restricted standard refuses it, and admission does.
	if u.RunAsUser != nil && *u.RunAsUser > 0 {
		sc.RunAsUser = ptrTo(*u.RunAsUser)
	}
	if u.RunAsGroup != nil {
		sc.RunAsGroup = ptrTo(int64(*u.RunAsGroup))
	}
	if u.FSGroup != nil {
		sc.FSGroup = ptrTo(int64(*u.FSGroup))
	}
	if u.FSGroupChangePolicy != nil {
		sc.FSGroupChangePolicy = ptrTo(*u.FSGroupChangePolicy)
	}
	for _, g := range u.SupplementalGroups {
		sc.SupplementalGroups = append(sc.SupplementalGroups, int64(g))
	}
	return sc
}

// userVolumes follow the operator's volumes.
func userVolumes(f *v1alpha1.CelldFleet) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range f.Spec.Pod.Volumes {
		if reservedVolume(v.Name) {
			continue
		}
		vol := corev1.Volume{Name: v.Name}
		switch {
		case v.ConfigMap != nil:
			vol.ConfigMap = &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: v.ConfigMap.Name},
				Items:                keyPaths(v.ConfigMap.Items),
				DefaultMode:          copyPtr(v.ConfigMap.DefaultMode),
				Optional:             copyPtr(v.ConfigMap.Optional),
			}
		case v.Secret != nil:
			vol.Secret = &corev1.SecretVolumeSource{
				SecretName:  v.Secret.SecretName,
				Items:       keyPaths(v.Secret.Items),
				DefaultMode: copyPtr(v.Secret.DefaultMode),
				Optional:    copyPtr(v.Secret.Optional),
			}
		case v.EmptyDir != nil:
			vol.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: v.EmptyDir.Medium}
			if v.EmptyDir.SizeLimit != nil {
				q := v.EmptyDir.SizeLimit.DeepCopy()
				vol.EmptyDir.SizeLimit = &q
			}
		default:
			// No source: admission refuses it; a Pod may not have it either.
			continue
		}
		out = append(out, vol)
	}
	return out
}

func keyPaths(items []v1alpha1.KeyPath) []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for _, i := range items {
		out = append(out, corev1.KeyToPath{Key: i.Key, Path: i.Path, Mode: copyPtr(i.Mode)})
	}
	return out
}

// userMounts are the mounts of the user's own volumes at paths that are not the operator's.
func userMounts(f *v1alpha1.CelldFleet, mounts []v1alpha1.VolumeMount) []corev1.VolumeMount {
	own := map[string]bool{}
	for _, v := range userVolumes(f) {
		own[v.Name] = true
	}
	var out []corev1.VolumeMount
	for _, m := range mounts {
		if !own[m.Name] || reservedPath(m.MountPath) {
			continue
		}
		out = append(out, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return out
}

func envFrom(from []v1alpha1.EnvFromSource) []corev1.EnvFromSource {
	var out []corev1.EnvFromSource
	for _, s := range from {
		if strings.HasPrefix(s.Prefix, reservedEnvPrefix) {
			continue
		}
		e := corev1.EnvFromSource{Prefix: s.Prefix}
		switch {
		case s.SecretRef != nil:
			e.SecretRef = &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: s.SecretRef.Name}, Optional: copyPtr(s.SecretRef.Optional)}
		case s.ConfigMapRef != nil:
			e.ConfigMapRef = &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: s.ConfigMapRef.Name}, Optional: copyPtr(s.ConfigMapRef.Optional)}
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

func envVars(vars []v1alpha1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range vars {
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

// sidecars run as native sidecar containers (init containers that keep running): they start
// before celld and are stopped after it, so a log shipper sees celld's last lines. Each gets the
// same restricted security context as celld.
func sidecars(f *v1alpha1.CelldFleet) []corev1.Container {
	var out []corev1.Container
	always := corev1.ContainerRestartPolicyAlways
	for _, s := range f.Spec.Pod.Sidecars {
		if reservedContainer(s.Name) {
			continue
		}
		out = append(out, corev1.Container{
			Name:            s.Name,
			Image:           s.Image,
			ImagePullPolicy: s.ImagePullPolicy,
			Command:         append([]string(nil), s.Command...),
			Args:            append([]string(nil), s.Args...),
			Env:             envVars(s.Env),
			EnvFrom:         envFrom(s.EnvFrom),
			Resources:       corev1.ResourceRequirements{Limits: s.Resources.Limits.DeepCopy(), Requests: s.Resources.Requests.DeepCopy()},
			VolumeMounts:    userMounts(f, s.VolumeMounts),
			RestartPolicy:   &always,
			SecurityContext: containerSecurity(),
		})
	}
	return out
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
