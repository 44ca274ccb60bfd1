package kube

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

func TestParseNamespaces(t *testing.T) {
	for in, want := range map[string][]string{
		"":                   nil,
		"  ":                 nil,
		"team":               {"team"},
		"team-b,team-a":      {"team-a", "team-b"},
		" team-b , team-a ":  {"team-a", "team-b"},
		"team-a,team-a,team": {"team", "team-a"},
	} {
		got, err := ParseNamespaces(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseNamespaces(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, names := range map[string]string{
		"team-a,":     "empty",
		"team-a,,b":   "empty",
		"Team":        `"Team"`,
		"team_a":      `"team_a"`,
		"a,-b":        `"-b"`,
		"team-a;team": `"team-a;team"`,
	} {
		if _, err := ParseNamespaces(in); err == nil || !strings.Contains(err.Error(), names) || !strings.Contains(err.Error(), "--namespace") {
			t.Errorf("ParseNamespaces(%q): %v, want an error about --namespace naming %s", in, err, names)
		}
	}
}

// TestInformersOfSeveralNamespaces: caches built for two namespaces hold what those two hold and
// nothing of a third, whether read by key, by index or by lister, and a handler hears the
// objects of both.
func TestInformersOfSeveralNamespaces(t *testing.T) {
	var kubeObjs, celldObjs []runtime.Object
	for _, ns := range []string{"team-a", "team-b", "team-c"} {
		f := testFleet(v1alpha1.ProfilePersistentFleet)
		f.Namespace, f.Name, f.UID = ns, "fleet", k8stypes.UID("uid-"+uidOf(ns))
		f.Spec.Bucket.Name = "shared"
		celldObjs = append(celldObjs, f)
		kubeObjs = append(kubeObjs,
			&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet-0", Labels: map[string]string{
				kinds.LabelManagedBy: kinds.ManagedBy, kinds.LabelFleetUID: "uid-" + uidOf(ns)}}})
	}
	i := NewInformers(kubefake.NewClientset(kubeObjs...), celldfake.NewSimpleClientset(celldObjs...), nil, []string{"team-a", "team-b"})
	var mu sync.Mutex
	heard := map[string]bool{}
	if _, err := i.Fleets.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		mu.Lock()
		defer mu.Unlock()
		heard[obj.(*v1alpha1.CelldFleet).Namespace] = true
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	i.Start(ctx.Done())
	if !i.WaitForCacheSync(ctx) {
		t.Fatal("the caches never synced")
	}

	for key, want := range map[string]bool{"team-a/fleet": true, "team-b/fleet": true, "team-c/fleet": false} {
		if _, ok, err := i.Fleets.GetIndexer().GetByKey(key); ok != want || err != nil {
			t.Errorf("fleet %s cached %t (%v), want %t", key, ok, err, want)
		}
		if _, ok, err := i.StatefulSets.GetIndexer().GetByKey(key); ok != want || err != nil {
			t.Errorf("StatefulSet %s cached %t (%v), want %t", key, ok, err, want)
		}
	}
	namespacesOf := func(objs []any, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, o.(metav1.Object).GetNamespace())
		}
		sort.Strings(out)
		return out
	}
	both := []string{"team-a", "team-b"}
	if got := namespacesOf(i.Fleets.GetIndexer().ByIndex(events.IndexBucket, "shared")); !reflect.DeepEqual(got, both) {
		t.Errorf("fleets naming the bucket: %v, want %v", got, both)
	}
	if got := namespacesOf(i.Fleets.GetIndexer().List(), nil); !reflect.DeepEqual(got, both) {
		t.Errorf("fleets listed: %v, want %v", got, both)
	}
	if got := namespacesOf(i.Pods.GetIndexer().ByIndex(events.IndexFleetUID, "uid-"+uidOf("team-c"))); len(got) != 0 {
		t.Errorf("the third namespace's Pods are cached: %v", got)
	}
	if got := namespacesOf(i.Pods.GetIndexer().ByIndex(events.IndexFleetUID, "uid-"+uidOf("team-b"))); !reflect.DeepEqual(got, []string{"team-b"}) {
		t.Errorf("team-b's member: %v", got)
	}
	sets, err := i.stsLister.List(labels.Everything())
	var setNS []any
	for _, s := range sets {
		setNS = append(setNS, s)
	}
	if got := namespacesOf(setNS, err); !reflect.DeepEqual(got, both) {
		t.Errorf("StatefulSets listed: %v, want %v", got, both)
	}
	if f, err := i.fleetLister.CelldFleets("team-c").Get("fleet"); err == nil {
		t.Errorf("the lister serves team-c's fleet %s", f.UID)
	}
	if keys := i.Fleets.GetIndexer().ListKeys(); len(keys) != 2 {
		t.Errorf("keys %v, want two", keys)
	}
	if err := i.Fleets.GetIndexer().Add(celldObjs[2]); err == nil {
		t.Error("the joined cache took a write")
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(heard, map[string]bool{"team-a": true, "team-b": true}) {
		t.Errorf("the handler heard fleets of %v, want team-a and team-b", heard)
	}
}

// uidOf makes a UID-like suffix of a namespace.
func uidOf(ns string) string { return strings.ReplaceAll(ns, "-", "") }
