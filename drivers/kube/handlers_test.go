package kube

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// testInformers are caches filled by hand, never started: handlers and observations read only
// the indexers.
func testInformers(t *testing.T, objs ...any) *Informers {
	t.Helper()
	i := NewInformers(kubefake.NewClientset(), celldfake.NewSimpleClientset(),
		metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), nil)
	for _, o := range objs {
		var inf cache.SharedIndexInformer
		switch o.(type) {
		case *v1alpha1.CelldFleet:
			inf = i.Fleets
		case *v1alpha1.CelldReservation:
			inf = i.Reservations
		case *appsv1.StatefulSet:
			inf = i.StatefulSets
		case *appsv1.Deployment:
			inf = i.Deployments
		case *corev1.Pod:
			inf = i.Pods
		case *corev1.PersistentVolumeClaim:
			inf = i.PVCs
		case *corev1.Node:
			inf = i.Nodes
		case *storagev1.StorageClass:
			inf = i.StorageClasses
		case *schedulingv1.PriorityClass:
			inf = i.PriorityClasses
		case *metav1.PartialObjectMetadata:
			inf = i.ServiceAccounts
		default:
			if inf = i.Owned(kinds.Of(o)); inf == nil {
				t.Fatalf("no cache for %T", o)
			}
		}
		if err := inf.GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return i
}

func memberPod(f *v1alpha1.CelldFleet, name, node string) *corev1.Pod {
	l := render.SelectorLabels(f)
	l[kinds.LabelManagedBy] = kinds.ManagedBy
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace, UID: types.UID("uid-" + name), Labels: l},
		Spec: corev1.PodSpec{NodeName: node}}
}

func TestFleetKeys(t *testing.T) {
	alpha := testFleet(v1alpha1.ProfilePersistentFleet)
	alpha.Spec.ServiceAccountName = "celld-iam"
	alpha.Spec.Pod.PriorityClassName = "fleet-critical"
	beta := testFleet(v1alpha1.ProfileBucket)
	beta.Name, beta.UID = "beta", "uid-beta"
	// beta names alpha's bucket: the reservation refuses it, and it must hear of the reservation.
	gamma := testFleet(v1alpha1.ProfileBucket)
	gamma.Name, gamma.UID, gamma.Spec.Bucket.Name = "gamma", "uid-gamma", "other-bucket"

	objs := render.Render(alpha, 3, 3)
	pod := memberPod(alpha, "alpha-0", "node-a")
	otherPod := memberPod(gamma, "gamma-0", "node-b")
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-0", Namespace: "team",
		Labels: map[string]string{kinds.LabelInstance: "alpha", kinds.LabelFleetUID: "uid-old", kinds.LabelManagedBy: kinds.ManagedBy}}}
	sa := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "celld-iam", Namespace: "team"}}
	foreignSts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"}}

	i := testInformers(t, alpha, beta, gamma, pod, otherPod)
	cases := []struct {
		name string
		obj  any
		want []string
	}{
		{"fleet: itself and every fleet naming its bucket", alpha, []string{"team/alpha", "team/beta"}},
		{"reservation: every fleet naming the bucket", render.RenderReservation(alpha), []string{"team/alpha", "team/beta"}},
		{"statefulset by controller reference", objs.StatefulSet, []string{"team/alpha"}},
		// A same-named workload of someone else's holds the fleet (NameTaken): the fleet must hear
		// of it going away.
		{"statefulset the fleet does not control, of the fleet's name", foreignSts, []string{"team/alpha"}},
		{"deployment of no fleet's name", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}}, nil},
		{"service by controller reference", render.OfType[*corev1.Service](objs)[0], []string{"team/alpha"}},
		{"network policy", render.OfType[*networkingv1.NetworkPolicy](objs)[1], []string{"team/alpha"}},
		{"pdb", render.OfType[*policyv1.PodDisruptionBudget](objs)[0], []string{"team/alpha"}},
		{"pod by instance label", pod, []string{"team/alpha"}},
		{"claim by instance label, whatever its fleet UID", claim, []string{"team/alpha"}},
		{"node: fleets with a member on it", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, []string{"team/alpha"}},
		{"node without members", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-z"}}, nil},
		{"storage class", &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}, []string{"team/alpha"}},
		{"service account", sa, []string{"team/alpha"}},
		{"priority class", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "fleet-critical"}}, []string{"team/alpha"}},
		{"priority class no fleet names", &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}}, nil},
		// Someone else's objects under a fleet's derived names hold that fleet (NameTaken), and
		// claims under its claim names (ForeignDisks), whatever their labels.
		{"unlabelled service under a derived name", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "alpha-peers", Namespace: "team"}}, []string{"team/alpha"}},
		{"unlabelled policy under a derived name", &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "alpha-clients", Namespace: "team"}}, []string{"team/alpha"}},
		{"unlabelled pdb of the fleet's name", &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"}}, []string{"team/alpha"}},
		{"service of no fleet's name", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-peers", Namespace: "team"}}, nil},
		{"unlabelled claim under a claim name", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-7", Namespace: "team"}}, []string{"team/alpha"}},
		{"claim of no claim name", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-alpha-07", Namespace: "team"}}, nil},
	}
	for _, c := range cases {
		var got []string
		for _, k := range i.FleetKeys(c.obj) {
			got = append(got, k.String())
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: keys %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHandlerEnqueues(t *testing.T) {
	alpha := testFleet(v1alpha1.ProfileBucket)
	i := testInformers(t, alpha)
	var got []string
	answered := map[bool]int{}
	h := i.handler(func(k events.FleetKey, answer bool) {
		got = append(got, k.String())
		answered[answer]++
	})

	pod := memberPod(alpha, "alpha-0", "node-a")
	pod.ResourceVersion = "5"
	h.OnAdd(pod, false)
	h.OnUpdate(pod, pod.DeepCopy()) // a resync: same resourceVersion
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "team/alpha-0", Obj: pod})
	if want := []string{"team/alpha", "team/alpha"}; !slices.Equal(got, want) {
		t.Errorf("enqueued %v, want %v (add and tombstoned delete, no resync)", got, want)
	}

	// A relabelled object is news to the fleet it left and the one it joined.
	got = nil
	moved := pod.DeepCopy()
	moved.ResourceVersion, moved.Labels = "6", map[string]string{kinds.LabelInstance: "beta"}
	h.OnUpdate(pod, moved)
	if want := []string{"team/alpha", "team/beta"}; !slices.Equal(got, want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}
	if answered[false] != 0 {
		t.Errorf("a member's changes enqueued %d keys as no answer, want every one an answer", answered[false])
	}

	// The fleet's own change is news, not an answer to its actions: it waits its turn.
	clear(answered)
	changedFleet := alpha.DeepCopy()
	changedFleet.ResourceVersion, changedFleet.Generation = "8", alpha.Generation+1
	h.OnUpdate(alpha, changedFleet)
	if answered[true] != 0 || answered[false] == 0 {
		t.Errorf("a fleet's update enqueued %v (answer: count), want only keys that are no answer", answered)
	}
}

func TestAnswers(t *testing.T) {
	alpha := testFleet(v1alpha1.ProfileBucket)
	for _, c := range []struct {
		obj  any
		want bool
	}{
		{memberPod(alpha, "alpha-0", "node-a"), true},
		{&appsv1.StatefulSet{}, true},
		{&appsv1.Deployment{}, true},
		{&corev1.PersistentVolumeClaim{}, true},
		{&corev1.Node{}, true},
		{alpha, false},
		{&v1alpha1.CelldReservation{}, false},
		{&corev1.Service{}, false},
		{&storagev1.StorageClass{}, false},
	} {
		if got := answers(c.obj); got != c.want {
			t.Errorf("answers(%T) = %v, want %v", c.obj, got, c.want)
		}
	}
}

func TestNodeUpdatesCountOnlyHealth(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastTransitionTime: t0, LastHeartbeatTime: t0}}}}
	heartbeat := node.DeepCopy()
	heartbeat.ResourceVersion = "2"
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(1060, 0))
	if changed(node, heartbeat) {
		t.Errorf("a heartbeat is not a health change")
	}
	notReady := heartbeat.DeepCopy()
	notReady.ResourceVersion = "3"
	notReady.Status.Conditions[0].Status = corev1.ConditionUnknown
	if !changed(heartbeat, notReady) {
		t.Errorf("a node going NotReady is a change")
	}
	tainted := heartbeat.DeepCopy()
	tainted.ResourceVersion = "4"
	tainted.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}
	if !changed(heartbeat, tainted) {
		t.Errorf("an unreachable taint is a change")
	}
}
