package kube

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
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

// TestUninstallUnknownDeletesNoDisk: a fleet being deleted whose CRD cannot be read is not taken
// for a fleet a person deleted. The read decides whether its disks go (a deletion) or stay (an
// uninstall), so a failed one stops the sync before any decision; the same sync with the CRD
// read as installed deletes the disk, so it is the error that kept it.
func TestUninstallUnknownDeletesNoDisk(t *testing.T) {
	for _, readFails := range []bool{true, false} {
		f := testFleet(v1alpha1.ProfilePersistentFleet)
		now := metav1.Now()
		f.DeletionTimestamp, f.Finalizers = &now, []string{v1alpha1.FleetFinalizer}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-0", Namespace: "team", UID: "uid-pvc", ResourceVersion: "17",
			Labels: map[string]string{kinds.LabelName: kinds.AppName, kinds.LabelInstance: "alpha", kinds.LabelFleetUID: string(f.UID)}}}
		scheme := metadatafake.NewTestScheme()
		metav1.AddMetaToScheme(scheme)
		meta := metadatafake.NewSimpleMetadataClient(scheme, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: FleetCRD}})
		if readFails {
			meta.PrependReactor("get", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewTooManyRequests("the API server is busy", 1)
			})
		}
		kube := kubefake.NewClientset(claim.DeepCopy())
		ctl, err := NewController(Clients{Kube: kube, Celld: celldfake.NewSimpleClientset(f.DeepCopy()), Metadata: meta, Recorder: record.NewFakeRecorder(10)},
			Options{Log: zerolog.Nop(), Metrics: NewMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		if err := ctl.inf.Fleets.GetIndexer().Add(f); err != nil {
			t.Fatal(err)
		}
		if err := ctl.inf.PVCs.GetIndexer().Add(claim); err != nil {
			t.Fatal(err)
		}
		err = ctl.syncAndWrite(context.Background(), key("team", "alpha"))
		deleted := false
		for _, a := range kube.Actions() {
			if a.GetVerb() == "delete" && a.GetResource().Resource == "persistentvolumeclaims" {
				deleted = true
			}
		}
		if readFails {
			if err == nil || deleted {
				t.Errorf("the CRD unreadable: sync error %v, disk deleted %v; want an error and the disk kept", err, deleted)
			}
			continue
		}
		if !deleted {
			t.Errorf("the CRD installed: the fleet's disk was not deleted (sync error %v): the test proves nothing", err)
		}
	}
}
