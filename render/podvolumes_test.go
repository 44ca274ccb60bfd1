package render

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

func memberSettings() v1alpha1.PodSettings {
	yes := true
	mode, keyMode := int32(0o440), int32(0o400)
	user, group, fs := int64(1001), v1alpha1.GroupID(1002), v1alpha1.GroupID(2000)
	always := corev1.FSGroupChangeAlways
	limit := resource.MustParse("64Mi")
	return v1alpha1.PodSettings{
		SecurityContext: &v1alpha1.PodSecurityContext{
			RunAsUser: &user, RunAsGroup: &group, FSGroup: &fs, FSGroupChangePolicy: &always,
			SupplementalGroups: []v1alpha1.GroupID{3000, 3001},
		},
		EnvFrom: []v1alpha1.EnvFromSource{
			{Prefix: "TLS_", SecretRef: &v1alpha1.ObjectRef{Name: "tls", Optional: &yes}},
			{ConfigMapRef: &v1alpha1.ObjectRef{Name: "tuning"}},
		},
		Volumes: []v1alpha1.Volume{
			{Name: "ca", ConfigMap: &v1alpha1.ConfigMapVolume{Name: "ca-bundle", DefaultMode: &mode,
				Items: []v1alpha1.KeyPath{{Key: "ca.crt", Path: "certs/ca.crt", Mode: &keyMode}}}},
			{Name: "creds", Secret: &v1alpha1.SecretVolume{SecretName: "bucket-creds", Optional: &yes}},
			{Name: "logs", EmptyDir: &v1alpha1.EmptyDirVolume{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}},
		},
		VolumeMounts: []v1alpha1.VolumeMount{
			{Name: "ca", MountPath: "/etc/celld/ca", ReadOnly: true},
			{Name: "logs", MountPath: "/var/log/celld"},
		},
		Sidecars: []v1alpha1.Sidecar{{
			Name: "shipper", Image: "example.com/shipper:1", ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/ship"}, Args: []string{"--from", "/logs"},
			Env:          []v1alpha1.EnvVar{{Name: "DEST", Value: "https://logs.example"}},
			EnvFrom:      []v1alpha1.EnvFromSource{{SecretRef: &v1alpha1.ObjectRef{Name: "shipper-token"}}},
			Resources:    v1alpha1.SidecarResources{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			VolumeMounts: []v1alpha1.VolumeMount{{Name: "logs", MountPath: "/logs", ReadOnly: true}},
		}},
	}
}

// TestMemberVolumesSidecarsAndSecurity: every member setting reaches the Pod template exactly,
// after the operator's own, and the members stay within the restricted Pod Security level.
func TestMemberVolumesSidecarsAndSecurity(t *testing.T) {
	yes, no := true, false
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		f := fleet(profile)
		plainTpl := templateOf(workloadOf(Render(f, 3, 3)))
		f.Spec.Pod = memberSettings()
		tpl := templateOf(workloadOf(Render(f, 3, 3)))

		mode, keyMode := int32(0o440), int32(0o400)
		limit := resource.MustParse("64Mi")
		wantVolumes := append(slices.Clone(plainTpl.Spec.Volumes),
			corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "ca-bundle"}, DefaultMode: &mode,
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "certs/ca.crt", Mode: &keyMode}}}}},
			corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "bucket-creds", Optional: &yes}}},
			corev1.Volume{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &limit}}},
		)
		if !equality.Semantic.DeepEqual(tpl.Spec.Volumes, wantVolumes) {
			t.Errorf("%s: volumes\n%+v\nwant\n%+v", profile, tpl.Spec.Volumes, wantVolumes)
		}
		c := tpl.Spec.Containers[0]
		wantMounts := append(slices.Clone(plainTpl.Spec.Containers[0].VolumeMounts),
			corev1.VolumeMount{Name: "ca", MountPath: "/etc/celld/ca", ReadOnly: true},
			corev1.VolumeMount{Name: "logs", MountPath: "/var/log/celld"},
		)
		if !equality.Semantic.DeepEqual(c.VolumeMounts, wantMounts) {
			t.Errorf("%s: celld's mounts %+v, want %+v", profile, c.VolumeMounts, wantMounts)
		}
		wantFrom := []corev1.EnvFromSource{
			{Prefix: "TLS_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}, Optional: &yes}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tuning"}}},
		}
		if !equality.Semantic.DeepEqual(c.EnvFrom, wantFrom) {
			t.Errorf("%s: celld's envFrom %+v, want %+v", profile, c.EnvFrom, wantFrom)
		}
		// The operator's variables are env, which Kubernetes puts above any key of envFrom.
		if !equality.Semantic.DeepEqual(c.Env, plainTpl.Spec.Containers[0].Env) {
			t.Errorf("%s: celld's env changed with envFrom: %+v", profile, c.Env)
		}

		user, group := int64(1001), int64(1002)
		always := corev1.FSGroupChangeAlways
		wantPod := &corev1.PodSecurityContext{
			RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			RunAsUser: &user, RunAsGroup: &group, FSGroup: ptrTo(int64(2000)), FSGroupChangePolicy: &always,
			SupplementalGroups: []int64{3000, 3001},
		}
		if !equality.Semantic.DeepEqual(tpl.Spec.SecurityContext, wantPod) {
			t.Errorf("%s: pod security context %+v, want %+v", profile, tpl.Spec.SecurityContext, wantPod)
		}

		restricted := &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		restart := corev1.ContainerRestartPolicyAlways
		wantSidecars := []corev1.Container{{
			Name: "shipper", Image: "example.com/shipper:1", ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/ship"}, Args: []string{"--from", "/logs"},
			Env:             []corev1.EnvVar{{Name: "DEST", Value: "https://logs.example"}},
			EnvFrom:         []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shipper-token"}}}},
			Resources:       corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			VolumeMounts:    []corev1.VolumeMount{{Name: "logs", MountPath: "/logs", ReadOnly: true}},
			RestartPolicy:   &restart,
			SecurityContext: restricted,
		}}
		if !equality.Semantic.DeepEqual(tpl.Spec.InitContainers, wantSidecars) {
			t.Errorf("%s: sidecars\n%+v\nwant\n%+v", profile, tpl.Spec.InitContainers, wantSidecars)
		}
		if len(tpl.Spec.Containers) != 1 || !equality.Semantic.DeepEqual(c.SecurityContext, restricted) {
			t.Errorf("%s: containers %d, celld's security context %+v: want celld alone, restricted", profile, len(tpl.Spec.Containers), c.SecurityContext)
		}
		if len(Overridden(f)) != 0 {
			t.Errorf("%s: nothing overridden, got %v", profile, Overridden(f))
		}
	}
}

// TestEachMemberSettingIsDrift: a workload rendered without any one of the settings is drift, so
// setting it, or a hand edit that removes it, rolls the members.
func TestEachMemberSettingIsDrift(t *testing.T) {
	full := memberSettings()
	fs := v1alpha1.GroupID(5)
	for name, drop := range map[string]func(*v1alpha1.PodSettings){
		"securityContext.runAsUser":  func(p *v1alpha1.PodSettings) { p.SecurityContext.RunAsUser = nil },
		"securityContext.runAsGroup": func(p *v1alpha1.PodSettings) { p.SecurityContext.RunAsGroup = nil },
		"securityContext.fsGroup":    func(p *v1alpha1.PodSettings) { p.SecurityContext.FSGroup = &fs },
		"securityContext.policy":     func(p *v1alpha1.PodSettings) { p.SecurityContext.FSGroupChangePolicy = nil },
		"securityContext.groups": func(p *v1alpha1.PodSettings) {
			p.SecurityContext.SupplementalGroups = p.SecurityContext.SupplementalGroups[:1]
		},
		"envFrom":               func(p *v1alpha1.PodSettings) { p.EnvFrom = p.EnvFrom[1:] },
		"envFrom.prefix":        func(p *v1alpha1.PodSettings) { p.EnvFrom[0].Prefix = "" },
		"volumes.items":         func(p *v1alpha1.PodSettings) { p.Volumes[0].ConfigMap.Items = nil },
		"volumeMounts":          func(p *v1alpha1.PodSettings) { p.VolumeMounts = p.VolumeMounts[:1] },
		"volumeMounts.readOnly": func(p *v1alpha1.PodSettings) { p.VolumeMounts[0].ReadOnly = false },
		"sidecars":              func(p *v1alpha1.PodSettings) { p.Sidecars = nil },
		"sidecars.image":        func(p *v1alpha1.PodSettings) { p.Sidecars[0].Image = "example.com/shipper:2" },
		"sidecars.args":         func(p *v1alpha1.PodSettings) { p.Sidecars[0].Args = nil },
		"sidecars.env":          func(p *v1alpha1.PodSettings) { p.Sidecars[0].Env = nil },
		"sidecars.resources":    func(p *v1alpha1.PodSettings) { p.Sidecars[0].Resources = v1alpha1.SidecarResources{} },
		"sidecars.volumeMounts": func(p *v1alpha1.PodSettings) { p.Sidecars[0].VolumeMounts = nil },
	} {
		f := fleet(v1alpha1.ProfileBucket)
		f.Spec.Pod = full
		want := workloadOf(Render(f, 3, 3))
		g := fleet(v1alpha1.ProfileBucket)
		g.Spec.Pod = *full.DeepCopy()
		drop(&g.Spec.Pod)
		if Matches(want, workloadOf(Render(g, 3, 3))) {
			t.Errorf("%s: a workload without it matches the fleet's, so it would never be rolled out", name)
		}
	}
}

// TestOperatorNamesWinForVolumesAndSidecars: admission refuses the operator's names and paths in
// spec.pod; a fleet stored before they were reserved still renders the operator's data volume,
// mounts and celld container, and the SettingsOverridden condition names what was left out.
func TestOperatorNamesWinForVolumesAndSidecars(t *testing.T) {
	zero := int64(0)
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		f := fleet(profile)
		plainTpl := templateOf(workloadOf(Render(f, 3, 3)))
		f.Spec.Pod = v1alpha1.PodSettings{
			SecurityContext: &v1alpha1.PodSecurityContext{RunAsUser: &zero},
			EnvFrom:         []v1alpha1.EnvFromSource{{Prefix: "CELLD_", ConfigMapRef: &v1alpha1.ObjectRef{Name: "evil"}}, {Prefix: "celld_", ConfigMapRef: &v1alpha1.ObjectRef{Name: "ok"}}},
			Volumes: []v1alpha1.Volume{
				{Name: kinds.DataVolume, EmptyDir: &v1alpha1.EmptyDirVolume{}},
				{Name: ScratchVolume, EmptyDir: &v1alpha1.EmptyDirVolume{}},
				{Name: "celld-future", EmptyDir: &v1alpha1.EmptyDirVolume{}},
				{Name: "celldish", EmptyDir: &v1alpha1.EmptyDirVolume{}},
			},
			VolumeMounts: []v1alpha1.VolumeMount{
				{Name: kinds.DataVolume, MountPath: "/mnt/data"},
				{Name: "celldish", MountPath: DataMountPath},
				{Name: "celldish", MountPath: DataMountPath + "/sub"},
				{Name: "celldish", MountPath: "/tmp/../var/lib/celld"},
				{Name: "celldish", MountPath: ScratchMountPath},
				{Name: "celldish", MountPath: "/var/lib/celldish"},
			},
			Sidecars: []v1alpha1.Sidecar{
				{Name: ContainerName, Image: "evil:1"},
				{Name: "celld-agent", Image: "evil:1"},
				{Name: "agent", Image: "ok:1", VolumeMounts: []v1alpha1.VolumeMount{{Name: kinds.DataVolume, MountPath: "/data"}}},
			},
		}
		tpl := templateOf(workloadOf(Render(f, 3, 3)))
		wantVolumes := append(slices.Clone(plainTpl.Spec.Volumes), corev1.Volume{Name: "celldish", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		if !equality.Semantic.DeepEqual(tpl.Spec.Volumes, wantVolumes) {
			t.Errorf("%s: volumes %+v, want the operator's and celldish only", profile, tpl.Spec.Volumes)
		}
		wantMounts := append(slices.Clone(plainTpl.Spec.Containers[0].VolumeMounts), corev1.VolumeMount{Name: "celldish", MountPath: "/var/lib/celldish"})
		if !equality.Semantic.DeepEqual(tpl.Spec.Containers[0].VolumeMounts, wantMounts) {
			t.Errorf("%s: celld's mounts %+v, want the operator's and /var/lib/celldish only", profile, tpl.Spec.Containers[0].VolumeMounts)
		}
		if len(tpl.Spec.Containers) != 1 || tpl.Spec.Containers[0].Image != f.Spec.Image {
			t.Errorf("%s: containers %+v, want celld alone on its image", profile, tpl.Spec.Containers)
		}
		if len(tpl.Spec.InitContainers) != 1 || tpl.Spec.InitContainers[0].Name != "agent" || len(tpl.Spec.InitContainers[0].VolumeMounts) != 0 {
			t.Errorf("%s: sidecars %+v, want agent alone, without the data volume", profile, tpl.Spec.InitContainers)
		}
		if got := tpl.Spec.Containers[0].EnvFrom; len(got) != 1 || got[0].Prefix != "celld_" {
			t.Errorf("%s: envFrom %+v, want the celld_ prefix alone", profile, got)
		}
		if sc := tpl.Spec.SecurityContext; sc.RunAsUser != nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: pod security context %+v: root taken from the user", profile, sc)
		}
		want := []string{
			"spec.pod.envFrom prefix CELLD_",
			"spec.pod.sidecars celld", "spec.pod.sidecars celld-agent",
			"spec.pod.volumeMounts /mnt/data",
			"spec.pod.volumeMounts /tmp",
			"spec.pod.volumeMounts /tmp/../var/lib/celld",
			"spec.pod.volumeMounts /var/lib/celld",
			"spec.pod.volumeMounts /var/lib/celld/sub",
			"spec.pod.volumes celld-future", "spec.pod.volumes data", "spec.pod.volumes tmp",
		}
		if got := Overridden(f); !slices.Equal(got, want) {
			t.Errorf("%s: Overridden = %v, want %v", profile, got, want)
		}
	}
}

// TestRemovedSettingIsDrift: a setting the user removes leaves the members, although the
// comparison otherwise lets the observed workload carry fields the desired one leaves out.
func TestRemovedSettingIsDrift(t *testing.T) {
	for name, drop := range map[string]func(*v1alpha1.PodSettings){
		"every sidecar":         func(p *v1alpha1.PodSettings) { p.Sidecars = nil },
		"every envFrom":         func(p *v1alpha1.PodSettings) { p.EnvFrom = nil },
		"a sidecar's envFrom":   func(p *v1alpha1.PodSettings) { p.Sidecars[0].EnvFrom = nil },
		"a sidecar's command":   func(p *v1alpha1.PodSettings) { p.Sidecars[0].Command = nil },
		"a sidecar's args":      func(p *v1alpha1.PodSettings) { p.Sidecars[0].Args = nil },
		"a sidecar's env":       func(p *v1alpha1.PodSettings) { p.Sidecars[0].Env = nil },
		"a sidecar's mounts":    func(p *v1alpha1.PodSettings) { p.Sidecars[0].VolumeMounts = nil },
		"the security context":  func(p *v1alpha1.PodSettings) { p.SecurityContext = nil },
		"runAsUser":             func(p *v1alpha1.PodSettings) { p.SecurityContext.RunAsUser = nil },
		"runAsGroup":            func(p *v1alpha1.PodSettings) { p.SecurityContext.RunAsGroup = nil },
		"supplementalGroups":    func(p *v1alpha1.PodSettings) { p.SecurityContext.SupplementalGroups = nil },
		"every imagePullSecret": func(p *v1alpha1.PodSettings) { p.ImagePullSecrets = nil },
		"the priorityClassName": func(p *v1alpha1.PodSettings) { p.PriorityClassName = "" },
	} {
		for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
			f := fleet(profile)
			f.Spec.Pod = memberSettings()
			f.Spec.Pod.ImagePullSecrets = []v1alpha1.PullSecret{{Name: "regcred"}}
			f.Spec.Pod.PriorityClassName = "fleet-critical"
			observed := workloadOf(Render(f, 3, 3))
			// What the API server adds to a stored workload is still no drift.
			tpl := templateSpec(observed)
			tpl.DNSPolicy = corev1.DNSClusterFirst
			tpl.InitContainers[0].TerminationMessagePath = "/dev/termination-log"
			tpl.Containers[0].TerminationMessagePath = "/dev/termination-log"
			if !Matches(workloadOf(Render(f, 3, 3)), observed) {
				t.Fatalf("%s: a stored workload with the API server's defaults counts as drift", profile)
			}
			g := fleet(profile)
			g.Spec.Pod = *f.Spec.Pod.DeepCopy()
			drop(&g.Spec.Pod)
			if Matches(workloadOf(Render(g, 3, 3)), observed) {
				t.Errorf("%s: with %s removed the members' workload still matches, so they keep it", profile, name)
			}
		}
	}
}

func templateSpec(w any) *corev1.PodSpec {
	if s, ok := w.(*appsv1.StatefulSet); ok {
		return &s.Spec.Template.Spec
	}
	return &w.(*appsv1.Deployment).Spec.Template.Spec
}
