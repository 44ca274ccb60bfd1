package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestProfiles: a fleet of each profile and workload reaches Ready with the objects SPEC section 3
// describes; `kubectl wait --for=condition=Ready` and the printer columns work.
func TestProfiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()

	deployment := f.newFleet("bucket-deployment", v1alpha1.ProfileBucket, 3)
	ordered := f.newFleet("bucket-ordered", v1alpha1.ProfileBucket, 3)
	ordered.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	persistent := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 3)
	fleets := []*v1alpha1.CelldFleet{deployment, ordered, persistent}
	for i, fl := range fleets {
		fleets[i] = f.create(fl)
	}
	for _, fl := range fleets {
		f.kubectl("wait", "--for=condition=Ready", "celldfleet/"+fl.Name, "--timeout=180s")
	}

	for _, fl := range fleets {
		checkFleetObjects(t, f, f.waitConverged(fl.Name))
	}

	// Printer columns: NAME PROFILE DESIRED READY STATE AGE.
	out := f.kubectl("get", "celldfleets")
	t.Logf("kubectl get celldfleets:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got, want := strings.Fields(lines[0]), []string{"NAME", "PROFILE", "DESIRED", "READY", "STATE", "AGE"}; !slices.Equal(got, want) {
		t.Errorf("columns: got %v, want %v", got, want)
	}
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		fields := strings.Fields(l)
		rows[fields[0]] = fields
	}
	for _, fl := range fleets {
		want := []string{fl.Name, string(fl.Spec.Profile), "3", "3", "Steady"}
		if got := rows[fl.Name]; len(got) < 5 || !slices.Equal(got[:5], want) {
			t.Errorf("row of %s: got %v, want %v AGE", fl.Name, got, want)
		}
	}
	if out := f.kubectl("explain", "celldfleet.spec.members"); !strings.Contains(out, "scale subresource") {
		t.Errorf("kubectl explain celldfleet.spec.members does not describe the field:\n%s", out)
	}
}

// checkFleetObjects checks what a converged fleet owns and carries.
func checkFleetObjects(t *testing.T, f *fixture, fl *v1alpha1.CelldFleet) {
	t.Helper()
	ctx, ns := f.ctx, f.ns
	owned := func(kind string, m metav1.Object) {
		t.Helper()
		refs := m.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != fl.UID || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s %s: want the fleet as controller owner, got %v", kind, m.GetName(), refs)
		}
		if m.GetLabels()["celld.io/fleet-uid"] != string(fl.UID) {
			t.Errorf("%s %s: want label celld.io/fleet-uid=%s, got %v", kind, m.GetName(), fl.UID, m.GetLabels())
		}
	}

	if !slices.Contains(fl.Finalizers, v1alpha1.FleetFinalizer) {
		t.Errorf("finalizers %v: want %s", fl.Finalizers, v1alpha1.FleetFinalizer)
	}
	for typ, want := range map[string]metav1.ConditionStatus{
		v1alpha1.ConditionReady: metav1.ConditionTrue, v1alpha1.ConditionProgressing: metav1.ConditionFalse,
		v1alpha1.ConditionDegraded: metav1.ConditionFalse, v1alpha1.ConditionReservationBound: metav1.ConditionTrue,
	} {
		if c := condition(fl, typ); c.Status != want || c.ObservedGeneration != fl.Generation {
			t.Errorf("condition %s: got %s (generation %d), want %s (generation %d)", typ, c.Status, c.ObservedGeneration, want, fl.Generation)
		}
	}
	if fl.Status.Selector == "" || fl.Status.BlockedBy != "" {
		t.Errorf("status: selector %q, blockedBy %q: want a selector and nothing blocking", fl.Status.Selector, fl.Status.BlockedBy)
	}

	r := f.reservation(fl)
	if r.Spec.FleetUID != fl.UID || r.Spec.FleetName != fl.Name || r.Spec.Profile != fl.Spec.Profile || len(r.OwnerReferences) != 0 {
		t.Errorf("reservation %s: spec %+v, owners %v: want bound to %s (%s), no owner", r.Name, r.Spec, r.OwnerReferences, fl.Name, fl.UID)
	}

	var tmpl corev1.PodTemplateSpec
	durability := "bucket"
	switch {
	case fl.Spec.Profile == v1alpha1.ProfileBucket && fl.Spec.Workload != v1alpha1.WorkloadOrderedStatefulSet:
		d, err := suite.kube.AppsV1().Deployments(ns).Get(ctx, fl.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("deployment: %v", err)
		}
		owned("Deployment", d)
		tmpl = d.Spec.Template
		if _, err := suite.kube.AppsV1().StatefulSets(ns).Get(ctx, fl.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("a Deployment fleet has a StatefulSet too")
		}
	default:
		s := f.statefulSet(fl.Name)
		owned("StatefulSet", s)
		tmpl = s.Spec.Template
		if s.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || s.Spec.ServiceName != fl.Name+"-peers" {
			t.Errorf("statefulset: podManagementPolicy %s, serviceName %s: want OrderedReady and %s-peers", s.Spec.PodManagementPolicy, s.Spec.ServiceName, fl.Name)
		}
		if fl.Spec.Profile == v1alpha1.ProfilePersistentFleet {
			durability = "fleet"
			p := s.Spec.PersistentVolumeClaimRetentionPolicy
			if len(s.Spec.VolumeClaimTemplates) != 1 || p == nil || p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
				p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
				t.Errorf("statefulset: want one volume claim template retained on delete and scale, got %d, %+v", len(s.Spec.VolumeClaimTemplates), p)
			}
			for i := 0; i < int(fl.Spec.Members); i++ {
				name := fmt.Sprintf("data-%s-%d", fl.Name, i)
				c, err := suite.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil || c.Status.Phase != corev1.ClaimBound {
					t.Errorf("claim %s: want Bound, got %v %v", name, err, c.Status.Phase)
				}
			}
		} else if len(s.Spec.VolumeClaimTemplates) != 0 {
			t.Errorf("a Bucket fleet's statefulset has volume claim templates")
		}
	}
	if len(tmpl.Spec.Containers) != 1 || len(tmpl.Spec.InitContainers) != 0 || tmpl.Spec.Containers[0].Image != fl.Spec.Image {
		t.Errorf("pod template: want celld alone as the container, got %d containers, %d init containers", len(tmpl.Spec.Containers), len(tmpl.Spec.InitContainers))
	} else if env := envOf(tmpl.Spec.Containers[0]); env["CELLD_DURABILITY"] != durability || env["CELLD_FLEET_UID"] != string(fl.UID) {
		t.Errorf("env: CELLD_DURABILITY=%q CELLD_FLEET_UID=%q: want %q and the fleet's UID", env["CELLD_DURABILITY"], env["CELLD_FLEET_UID"], durability)
	}

	peers, err := suite.kube.CoreV1().Services(ns).Get(ctx, fl.Name+"-peers", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("peer service: %v", err)
	}
	owned("Service", peers)
	if peers.Spec.ClusterIP != corev1.ClusterIPNone || !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("peer service: want headless with publishNotReadyAddresses, got clusterIP %q publishNotReadyAddresses %v", peers.Spec.ClusterIP, peers.Spec.PublishNotReadyAddresses)
	}
	app, err := suite.kube.CoreV1().Services(ns).Get(ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("application service: %v", err)
	}
	owned("Service", app)
	pdb, err := suite.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, fl.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod disruption budget: %v", err)
	}
	owned("PodDisruptionBudget", pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("pod disruption budget: want maxUnavailable 1, got %v", pdb.Spec.MaxUnavailable)
	}
	nps, err := suite.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{LabelSelector: memberSelector(fl)})
	if err != nil || len(nps.Items) == 0 {
		t.Errorf("network policies: want some, got %v %v", err, nps)
	}
	for i := range nps.Items {
		owned("NetworkPolicy", &nps.Items[i])
	}

	pods := f.members(fl)
	nodes := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if !podReady(p) {
			t.Errorf("member %s not ready", p.Name)
		}
		nodes[p.Spec.NodeName] = true
	}
	if len(pods) != int(fl.Spec.Members) || len(nodes) != len(pods) {
		t.Errorf("members: want %d on as many nodes, got %d on %d nodes", fl.Spec.Members, len(pods), len(nodes))
	}
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// TestGrowAndShrink: growth reaches the target in one apply; scale-in (through `kubectl scale`, the
// scale subresource) removes one member per step, each only after the previous step rolled out.
func TestGrowAndShrink(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	fl := f.newFleet("resize", v1alpha1.ProfileBucket, 3)
	fl.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	fl.Spec.Capacity.ScaleInStabilization = duration(0)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	sets := f.recordStatefulSets()

	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 6 })
	f.waitConverged(fl.Name)
	grow := statefulSetChanges(sets.Await(t, "rolled out at 6", rolledOutAt(fl.Name, 6)), fl.Name)
	if len(grow) != 1 || grow[0].from != 3 || grow[0].to != 6 {
		t.Fatalf("grow 3 to 6: want one change 3->6 of spec.replicas, got %+v", grow)
	}
	t.Logf("grew 3->6 in one apply")

	f.kubectl("scale", "celldfleet", fl.Name, "--replicas=3")
	fl = f.waitConverged(fl.Name)
	changes := statefulSetChanges(sets.Await(t, "rolled out at 3", rolledOutAt(fl.Name, 3)), fl.Name)[1:]
	checkOneStepShrink(t, changes, 6, 3)
	if fl.Spec.Members != 3 || len(f.members(fl)) != 3 {
		t.Errorf("after kubectl scale --replicas=3: spec.members %d, %d members", fl.Spec.Members, len(f.members(fl)))
	}
	t.Logf("capacity history: %s", formatHistory(f.reservation(fl).Status.CapacityHistory))
}
