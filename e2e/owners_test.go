package e2e

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// usersObject is an object a person made, as it was before the fleet: what must not change.
type usersObject struct {
	kind, name, uid string
	// generation moves with every write of spec, labels aside; writers are the field managers
	// that wrote the object outside its status (the disruption controller writes a budget's
	// status on its own schedule, which is nobody's takeover).
	generation int64
	writers    []string
	labels     map[string]string
	spec       any
	owners     []metav1.OwnerReference
}

func (f *fixture) readUsersObject(kind, name string) (usersObject, error) {
	o := usersObject{kind: kind, name: name}
	var m metav1.Object
	switch kind {
	case "Service":
		s, err := suite.kube.CoreV1().Services(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return o, err
		}
		m, o.spec = s, s.Spec
	case "PodDisruptionBudget":
		p, err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return o, err
		}
		m, o.spec = p, p.Spec
	case "NetworkPolicy":
		p, err := suite.kube.NetworkingV1().NetworkPolicies(f.ns).Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return o, err
		}
		m, o.spec = p, p.Spec
	default:
		return o, fmt.Errorf("no reader for %s", kind)
	}
	o.uid, o.generation, o.owners, o.labels = string(m.GetUID()), m.GetGeneration(), m.GetOwnerReferences(), m.GetLabels()
	for _, mf := range m.GetManagedFields() {
		if mf.Subresource != "status" {
			o.writers = append(o.writers, mf.Manager)
		}
	}
	return o, nil
}

// unchanged compares an object with how the person left it: the same object (UID), never written
// outside its status (generation, field managers, labels), the same spec and no owner.
func (f *fixture) unchanged(before usersObject) error {
	now, err := f.readUsersObject(before.kind, before.name)
	switch {
	case err != nil:
		return fmt.Errorf("%s/%s: %v", before.kind, before.name, err)
	case now.uid != before.uid:
		return fmt.Errorf("%s/%s was replaced (uid %s, was %s)", before.kind, before.name, now.uid, before.uid)
	case now.generation != before.generation || !reflect.DeepEqual(now.writers, before.writers) || !reflect.DeepEqual(now.labels, before.labels):
		return fmt.Errorf("%s/%s was written (generation %d, was %d; written by %v, was %v; labels %v, was %v)", before.kind, before.name,
			now.generation, before.generation, now.writers, before.writers, now.labels, before.labels)
	case !reflect.DeepEqual(now.spec, before.spec):
		return fmt.Errorf("%s/%s spec changed:\n%s\nwas:\n%s", before.kind, before.name, toYAML(now.spec), toYAML(before.spec))
	case len(now.owners) != 0:
		return fmt.Errorf("%s/%s has owners %+v", before.kind, before.name, now.owners)
	}
	return nil
}

// TestUsersObjectsUnderFleetNames: a person's Service, PodDisruptionBudget and NetworkPolicy that
// already carry a new fleet's derived names are never patched, adopted or deleted: the fleet is
// Degraded=NameTaken naming each, gets no workload, and once it is deleted the person's objects
// are still there, exactly as they were, while the objects the operator made for it are gone.
func TestUsersObjectsUnderFleetNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const name = "taken"
	mine := map[string]string{"app": "mine"}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(80)
	one := intstr.FromInt32(1)
	if _, err := suite.kube.CoreV1().Services(f.ns).Create(f.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: mine, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: tcp}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := suite.kube.PolicyV1().PodDisruptionBudgets(f.ns).Create(f.ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: mine}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := suite.kube.NetworkingV1().NetworkPolicies(f.ns).Create(f.ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name + kinds.SuffixPeers},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: mine}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before []usersObject
	for _, o := range [][2]string{{"Service", name}, {"PodDisruptionBudget", name}, {"NetworkPolicy", name + kinds.SuffixPeers}} {
		u, err := f.readUsersObject(o[0], o[1])
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, u)
	}
	f.startOperator()

	fl := f.create(f.newFleet(name, v1alpha1.ProfilePersistentFleet, 2))
	f.waitDegraded(fl.Name, machine.ReasonNameTaken, "Service/"+name, "PodDisruptionBudget/"+name, "NetworkPolicy/"+name+kinds.SuffixPeers, "never takes them over")
	// The objects the operator makes for the fleet under free names are its own; the workload is
	// held: it would run beside a Service and a budget that select someone else's Pods.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := suite.kube.CoreV1().Services(f.ns).Get(ctx, name+kinds.SuffixPeers, metav1.GetOptions{})
		return err == nil && kinds.ControlledBy(s, fl.UID), nil
	}); err != nil {
		t.Errorf("the fleet's own peer Service %s%s never appeared", name, kinds.SuffixPeers)
	}
	f.holds(5*time.Second, "someone else's objects untouched, no workload", func() error {
		for _, b := range before {
			if err := f.unchanged(b); err != nil {
				return err
			}
		}
		if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("statefulset %s: %v; want none beside objects the fleet does not own", name, err)
		}
		return nil
	})

	// Two fleets cannot share derived names: the fleet named like this one's peer objects is
	// refused at admission.
	rival := f.newFleet(name+kinds.SuffixPeers, v1alpha1.ProfileBucket, 1)
	if _, err := f.fleets().Create(f.ctx, rival, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("fleet %s, whose Service would be fleet %s's peer Service: %v; want it refused naming metadata.name", rival.Name, name, err)
	}

	f.deleteFleet(fl.Name, true)
	// The garbage collector deletes what the operator made for the fleet; the person's objects
	// stay, exactly as they were.
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.kube.CoreV1().Services(f.ns).Get(ctx, name+kinds.SuffixPeers, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the deleted fleet's own Service %s%s is still there after a minute", name, kinds.SuffixPeers)
	}
	for _, b := range before {
		if err := f.unchanged(b); err != nil {
			t.Errorf("after the fleet's deletion: %v", err)
		}
	}
	t.Logf("Service, PodDisruptionBudget and NetworkPolicy of a person's under fleet %s's names: never written, alive after the fleet was deleted", name)
}

// rowUnlabelledClaim: a claim under a PersistentFleet's claim name that carries no label at all
// holds the fleet (ForeignDisks) before a StatefulSet could adopt it. Once it is gone the fleet
// converges, and its deletion deletes its own claims by their exact names only: a claim labelled
// with the fleet's UID under another name is kept.
func rowUnlabelledClaim(t *testing.T, f *fixture, _ *operator) string {
	const name = "unlabelled"
	claim := f.createClaim(kinds.ClaimName(name, 1), nil)
	claims := f.recordClaims()
	fl := f.create(f.newFleet(name, v1alpha1.ProfilePersistentFleet, 2))
	got := f.waitDegraded(fl.Name, machine.ReasonForeignDisks, claim.Name, "never adopts")
	f.holds(3*time.Second, "no workload to adopt a claim of someone else's", func() error {
		if _, err := suite.kube.AppsV1().StatefulSets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("statefulset %s: %v; want none", fl.Name, err)
		}
		return nil
	})
	f.noDeletions(claims, "claims")
	if err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Delete(f.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cur := f.waitConverged(fl.Name)

	// A claim with every label of the fleet's own, its UID included, under a name its
	// StatefulSet never gives: not the fleet's to delete.
	own := f.claimsOf(cur)
	lookalike := f.createClaim("data-"+name+"-spare", map[string]string{
		kinds.LabelName: kinds.AppName, kinds.LabelInstance: name, kinds.LabelManagedBy: kinds.ManagedBy, kinds.LabelFleetUID: string(cur.UID),
	})
	f.deleteFleet(fl.Name, true)
	var uids []types.UID
	for uid := range own {
		uids = append(uids, uid)
	}
	claims.Await(t, "the fleet's own claims gone", gone(uids...))
	if _, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).Get(f.ctx, lookalike.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("claim %s, labelled as the fleet's but not named as its claims: %v; want it kept", lookalike.Name, err)
	}
	if _, ok := deletions(claims.Events(t))[lookalike.UID]; ok {
		t.Errorf("claim %s deleted", lookalike.Name)
	}
	return got + fmt.Sprintf("; deleted: %d own claims, kept %s", len(own), lookalike.Name)
}
