package kube

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func TestUninstallingReadsTheFleetCRD(t *testing.T) {
	crd := func(deleting bool) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: FleetCRD}}
		if deleting {
			now := metav1.Now()
			m.DeletionTimestamp = &now
			m.Finalizers = []string{"customresourcecleanup.apiextensions.k8s.io"}
		}
		return m
	}
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	for _, c := range []struct {
		name string
		objs []runtime.Object
		want bool
	}{
		{"installed", []runtime.Object{crd(false)}, false},
		{"being deleted", []runtime.Object{crd(true)}, true},
		{"gone", nil, true},
	} {
		got, err := uninstalling(context.Background(), metadatafake.NewSimpleMetadataClient(scheme, c.objs...))
		if err != nil || got != c.want {
			t.Errorf("%s: uninstalling %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if got, err := uninstalling(context.Background(), nil); got || err != nil {
		t.Errorf("no metadata client: %v, %v; want false", got, err)
	}
}
