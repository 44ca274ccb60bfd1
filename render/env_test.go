package render

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/celldstore"
)

// TestEnvFromNeverSetsAnOwnedVariable: with a Secret or ConfigMap given through spec.pod.envFrom,
// every variable the operator owns is an explicit variable of celld's container, once, with the
// operator's value (empty when the fleet sets none): Kubernetes lets it win over a key of the same
// name, so the key never reaches celld. A fleet without a bucket endpoint is the case that matters
// most: left out, CELLD_BUCKET_ENDPOINT would come from the ConfigMap, and the members would talk
// to a store the reservation never allowed.
func TestEnvFromNeverSetsAnOwnedVariable(t *testing.T) {
	no := false
	for source, from := range map[string]v1alpha1.EnvFromSource{
		"configMap": {ConfigMapRef: &v1alpha1.ObjectRef{Name: "settings"}},
		"secret":    {SecretRef: &v1alpha1.ObjectRef{Name: "secrets", Optional: &no}},
		// A prefix that is not CELLD_ may still spell an owned name with a key.
		"configMap with prefix CELL": {Prefix: "CELL", ConfigMapRef: &v1alpha1.ObjectRef{Name: "settings"}},
	} {
		for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
			f := fleet(profile)
			f.Spec.Bucket.Endpoint = ""
			f.Spec.Pod.EnvFrom = []v1alpha1.EnvFromSource{from}
			c := templateOf(workloadOf(Render(f, 3, 3))).Spec.Containers[0]
			if len(c.EnvFrom) != 1 {
				t.Fatalf("%s: envFrom %+v, want the user's source", profile, c.EnvFrom)
			}
			for _, name := range OwnedEnv() {
				t.Run(string(profile)+"/"+source+"/"+name, func(t *testing.T) {
					i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
					if i < 0 {
						t.Fatalf("%s is not an explicit variable: a key of envFrom would set it (env %v)", name, c.Env)
					}
					if n := countEnv(c.Env, name); n != 1 {
						t.Errorf("%s is set %d times", name, n)
					}
					if name == "CELLD_BUCKET_ENDPOINT" && (c.Env[i].Value != "" || c.Env[i].ValueFrom != nil) {
						t.Errorf("%s = %+v, want empty: the fleet sets no endpoint", name, c.Env[i])
					}
				})
			}
		}
	}
}

func countEnv(env []corev1.EnvVar, name string) int {
	n := 0
	for _, e := range env {
		if e.Name == name {
			n++
		}
	}
	return n
}

// TestNoEnvFromRendersNoEmptyEndpoint: without envFrom nothing could set an owned variable (the
// user's env leaves CELLD_ names out), and the members render as before this rule: an upgrade
// rolls none of them (docs/upgrade.md).
func TestNoEnvFromRendersNoEmptyEndpoint(t *testing.T) {
	f := fleet(v1alpha1.ProfileBucket)
	f.Spec.Bucket.Endpoint = ""
	f.Spec.Pod.Env = []v1alpha1.EnvVar{{Name: "CELLD_BUCKET_ENDPOINT", Value: "http://elsewhere"}}
	c := templateOf(workloadOf(Render(f, 3, 3))).Spec.Containers[0]
	if n := countEnv(c.Env, "CELLD_BUCKET_ENDPOINT"); n != 0 {
		t.Errorf("CELLD_BUCKET_ENDPOINT set %d times, want none: env %v", n, c.Env)
	}
}

// TestOwnedEnvCoversWhatCelldReads: every CELLD_ variable celld reads is the operator's, but the
// settings of the stand-in's own tests, which no member is given: a variable celld comes to read
// and the operator forgets to own could be set through envFrom.
func TestOwnedEnvCoversWhatCelldReads(t *testing.T) {
	standIn := []string{"CELLD_PEERS", "CELLD_DATA_DIR", "CELLD_SYNC_INTERVAL"}
	read := map[string]bool{}
	for _, durability := range []string{celldstore.DurabilityFleet, celldstore.DurabilityBucket} {
		_, _ = celldstore.FromEnv(func(k string) string {
			read[k] = true
			switch k {
			case "CELLD_DURABILITY":
				return durability
			case "CELLD_MEMBER_NAME", "CELLD_BUCKET_NAME":
				return "x"
			}
			return ""
		})
	}
	owned := OwnedEnv()
	for k := range read {
		if strings.HasPrefix(k, "CELLD_") && !slices.Contains(owned, k) && !slices.Contains(standIn, k) {
			t.Errorf("celld reads %s, which the operator does not own: add it to ownedEnv", k)
		}
	}
}
