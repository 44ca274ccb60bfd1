package realnodes

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestMemberPodSettings runs members given spec.pod's security context, extra volumes and a
// sidecar on real nodes, in a namespace that enforces the restricted Pod Security level: celld
// runs as the user and groups asked, its data volume belongs to the fsGroup asked, it reads a
// ConfigMap mounted where asked, and the sidecar, started beside it, shares a volume with it.
// Each is judged on the running processes and their files, not on the Pod spec.
func TestMemberPodSettings(t *testing.T) {
	f := newFixture(t)
	bundle := "-----BEGIN CERTIFICATE-----\n" + rand.String(48) + "\n-----END CERTIFICATE-----\n"
	if _, err := suite.kube.CoreV1().ConfigMaps(f.ns).Create(f.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ca-bundle"}, Data: map[string]string{"ca.crt": bundle},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const user, fsGroup, extraGroup = 1001, 2000, 3000
	spec := f.newFleet("ps", v1alpha1.ProfileBucket, 2)
	uid, fs := int64(user), v1alpha1.GroupID(fsGroup)
	spec.Spec.Pod = v1alpha1.PodSettings{
		SecurityContext: &v1alpha1.PodSecurityContext{RunAsUser: &uid, FSGroup: &fs, SupplementalGroups: []v1alpha1.GroupID{extraGroup}},
		Volumes: []v1alpha1.Volume{
			{Name: "ca", ConfigMap: &v1alpha1.ConfigMapVolume{Name: "ca-bundle"}},
			{Name: "shared", EmptyDir: &v1alpha1.EmptyDirVolume{}},
		},
		VolumeMounts: []v1alpha1.VolumeMount{
			{Name: "ca", MountPath: "/etc/celld/ca", ReadOnly: true},
			{Name: "shared", MountPath: "/etc/celld/shared", ReadOnly: true},
		},
		Sidecars: []v1alpha1.Sidecar{{
			Name: "shipper", Image: shipperImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Env: []v1alpha1.EnvVar{{Name: "SHIPPER_FROM", Value: "/in/ca.crt"}, {Name: "SHIPPER_TO", Value: "/out/ca.crt"}},
			VolumeMounts: []v1alpha1.VolumeMount{
				{Name: "ca", MountPath: "/in", ReadOnly: true},
				{Name: "shared", MountPath: "/out"},
			},
		}},
	}
	fl := f.waitConverged(f.create(spec).Name)

	pods := f.membersReady(fl)
	if len(pods) != 2 {
		t.Fatalf("%d member Pods, want 2", len(pods))
	}
	procs := processes(fl.UID)
	for _, p := range pods {
		started := false
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == "shipper" && s.Started != nil && *s.Started && s.State.Running != nil {
				started = true
			}
		}
		if !started {
			t.Errorf("member %s: the sidecar shipper is not running (%+v)", p.Name, p.Status.InitContainerStatuses)
		}
		ps := procs[p.Name]
		if len(ps) != 1 {
			t.Errorf("member %s: %d celld processes on the machine, want 1", p.Name, len(ps))
			continue
		}
		m := ps[0]
		if m.procUID != user {
			t.Errorf("member %s runs as uid %d, want %d", p.Name, m.procUID, user)
		}
		if !slices.Contains(m.procGroups, fsGroup) || !slices.Contains(m.procGroups, extraGroup) {
			t.Errorf("member %s's process has groups %v, want %d and %d among them", p.Name, m.procGroups, fsGroup, extraGroup)
		}
		// The container's files, as its process sees them.
		root := filepath.Join("/proc", strconv.Itoa(m.pid), "root")
		if fi, err := os.Stat(filepath.Join(root, "var/lib/celld")); err != nil {
			t.Errorf("member %s's data directory: %v", p.Name, err)
		} else if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != fsGroup {
			t.Errorf("member %s's data directory belongs to group %d, want the fsGroup %d", p.Name, gid, fsGroup)
		}
		if got, err := os.ReadFile(filepath.Join(root, "etc/celld/ca/ca.crt")); err != nil || string(got) != bundle {
			t.Errorf("member %s reads %q (%v) at /etc/celld/ca/ca.crt, want the ConfigMap's bundle", p.Name, got, err)
		}
		shipped := filepath.Join(root, "etc/celld/shared/ca.crt")
		waitFor(t, f.ctx, "member "+p.Name+" sees what its sidecar shipped", converge, func() bool {
			got, err := os.ReadFile(shipped)
			return err == nil && bytes.Equal(got, []byte(bundle))
		})
	}
	f.verify()
}

// TestEnvFromCannotRedirectMembers gives a fleet's members a ConfigMap through spec.pod.envFrom
// that carries a bucket endpoint and a peer domain of its own, as a stray or hostile ConfigMap
// would: each member's celld process runs with the operator's values (an empty endpoint where
// the fleet sets none) and still gets the ConfigMap's other keys. Judged on the environment the
// kubelet gave the processes.
func TestEnvFromCannotRedirectMembers(t *testing.T) {
	f := newFixture(t)
	if _, err := suite.kube.CoreV1().ConfigMaps(f.ns).Create(f.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "stray"},
		Data: map[string]string{
			"CELLD_BUCKET_ENDPOINT": "http://elsewhere.invalid:9000",
			"CELLD_PEER_DOMAIN":     "elsewhere.invalid",
			"STRAY_SETTING":         "kept",
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := f.newFleet("ef", v1alpha1.ProfilePersistentFleet, 2)
	spec.Spec.Pod.EnvFrom = []v1alpha1.EnvFromSource{{ConfigMapRef: &v1alpha1.ObjectRef{Name: "stray"}}}
	fl := f.waitConverged(f.create(spec).Name)
	want := map[string]string{
		"CELLD_BUCKET_ENDPOINT": "",
		"CELLD_PEER_DOMAIN":     fl.Name + "-peers." + f.ns + ".svc",
		"STRAY_SETTING":         "kept",
	}
	procs := processes(fl.UID)
	if len(procs) != 2 {
		t.Fatalf("%d members' processes, want 2", len(procs))
	}
	for name, ps := range procs {
		for _, m := range ps {
			env := environ(m.pid)
			for k, v := range want {
				if got, ok := env[k]; !ok || got != v {
					t.Errorf("member %s: %s=%q (set: %t), want %q", name, k, got, ok, v)
				}
			}
		}
	}
	f.verify()
}

// environ is the environment of process pid.
func environ(pid int) map[string]string {
	out := map[string]string{}
	raw, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	for _, kv := range bytes.Split(raw, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			out[k] = v
		}
	}
	return out
}
