package machine

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// fleet is the fleet the machine's tests decide on: three members of the given profile.
func fleet(profile v1alpha1.Profile) *v1alpha1.CelldFleet {
	f := &v1alpha1.CelldFleet{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-1", Generation: 1},
		Spec: v1alpha1.CelldFleetSpec{Profile: profile, Members: 3, Image: "registry.example/celld:1.2", ServiceAccountName: "celld-iam",
			Bucket: v1alpha1.BucketSpec{Name: "bkt", Region: "eu-west-1", Endpoint: "https://s3.example"}},
	}
	if profile == v1alpha1.ProfilePersistentFleet {
		f.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "fast", Size: resource.MustParse("100Gi")}
	}
	return f
}
