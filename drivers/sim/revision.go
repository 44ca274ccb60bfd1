package sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// templateHash names a pod template the way controllers label their Pods: equal templates give
// equal hashes across runs (JSON orders map keys), and any change gives another.
func templateHash(t *corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("sim: hash pod template: %v", err))
	}
	h := fnv.New32a()
	h.Write(b)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// suffixAlphabet is the alphabet Kubernetes draws generated name suffixes from (no vowels, no
// look-alikes).
const suffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// generateName returns prefix plus a five-character suffix, from a counter rather than the
// random source the API server uses, so names are the same on every run.
func (c *Cluster) generateName(prefix string) string {
	c.nameSeq++
	n := c.nameSeq
	b := make([]byte, 5)
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = suffixAlphabet[n%uint64(len(suffixAlphabet))]
		n /= uint64(len(suffixAlphabet))
	}
	return prefix + string(b)
}

func controllerRef(owner metav1.Object, apiVersion, kind string) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: &t, BlockOwnerDeletion: &t}
}

// controlledBy reports whether o's controller reference is the object with that UID.
func controlledBy(o metav1.Object, owner metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(o)
	return ref != nil && ref.UID == owner.GetUID()
}
