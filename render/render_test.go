package render

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

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

func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func TestRenderPersistentFleet(t *testing.T) {
	f := fleet(v1alpha1.ProfilePersistentFleet)
	o := Render(f, 3, 3)
	s := o.StatefulSet
	if s == nil || o.Deployment != nil {
		t.Fatal("a PersistentFleet runs as a StatefulSet")
	}
	if *s.Spec.Replicas != 3 || s.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || s.Spec.ServiceName != "a-peers" {
		t.Errorf("statefulset: replicas %d, policy %s, service %s", *s.Spec.Replicas, s.Spec.PodManagementPolicy, s.Spec.ServiceName)
	}
	rp := s.Spec.PersistentVolumeClaimRetentionPolicy
	if rp == nil || rp.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType || rp.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("disks must be retained on scale-in and deletion: %+v", rp)
	}
	if len(s.Spec.VolumeClaimTemplates) != 1 || *s.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "fast" ||
		s.Spec.VolumeClaimTemplates[0].Labels[kinds.LabelFleetUID] != "uid-1" {
		t.Errorf("claim template: %+v", s.Spec.VolumeClaimTemplates)
	}
	if s.Annotations[kinds.AnnotationSettled] != "3" {
		t.Errorf("settled size not recorded: %v", s.Annotations)
	}
	p := s.Spec.Template.Spec
	if len(p.Containers) != 1 || len(p.InitContainers) != 0 || p.Containers[0].Image != f.Spec.Image || len(p.Containers[0].Command) != 0 {
		t.Errorf("members must run celld directly from the user's image, nothing else: %+v", p.Containers)
	}
	e := env(p.Containers[0])
	if e["CELLD_DURABILITY"].Value != "fleet" || e["CELLD_FLEET_UID"].Value != "uid-1" || e["CELLD_PEER_DOMAIN"].Value != "a-peers.ns.svc" ||
		e["CELLD_BUCKET_NAME"].Value != "bkt" || e["CELLD_BUCKET_ENDPOINT"].Value != "https://s3.example" ||
		e["CELLD_MEMBER_NAME"].ValueFrom == nil || e["CELLD_MEMBER_NAME"].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("env: %+v", e)
	}
	if p.ServiceAccountName != "celld-iam" {
		t.Errorf("service account %q", p.ServiceAccountName)
	}
	if len(p.TopologySpreadConstraints) != 2 || p.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule ||
		p.TopologySpreadConstraints[0].TopologyKey != corev1.LabelHostname || p.TopologySpreadConstraints[1].WhenUnsatisfiable != corev1.ScheduleAnyway {
		t.Errorf("default spread must be hard across nodes and soft across zones: %+v", p.TopologySpreadConstraints)
	}
	sc := p.Containers[0].SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("the container must meet the restricted Pod Security level: %+v", sc)
	}
}

func TestRenderBucketProfiles(t *testing.T) {
	f := fleet(v1alpha1.ProfileBucket)
	lim := resource.MustParse("5Gi")
	f.Spec.Scratch = &v1alpha1.ScratchSpec{SizeLimit: &lim}
	o := Render(f, 2, -1)
	d := o.Deployment
	if d == nil || o.StatefulSet != nil {
		t.Fatal("a Bucket fleet runs as a Deployment by default")
	}
	if d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("a rolling update must never take a member away before its replacement is ready: %+v", d.Spec.Strategy)
	}
	if _, ok := d.Annotations[kinds.AnnotationSettled]; ok {
		t.Error("no settled size may be recorded before provisioning completes")
	}
	v := d.Spec.Template.Spec.Volumes
	if len(v) != 2 || v[0].Name != kinds.DataVolume || v[0].EmptyDir == nil || v[0].EmptyDir.SizeLimit.Cmp(lim) != 0 {
		t.Errorf("scratch disk: %+v", v)
	}
	if env(d.Spec.Template.Spec.Containers[0])["CELLD_DURABILITY"].Value != "bucket" {
		t.Error("a Bucket fleet runs with CELLD_DURABILITY=bucket")
	}
	f.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	o = Render(f, 2, -1)
	if o.StatefulSet == nil || len(o.StatefulSet.Spec.VolumeClaimTemplates) != 0 || o.StatefulSet.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement {
		t.Errorf("OrderedStatefulSet: an ordered StatefulSet with a scratch disk: %+v", o.StatefulSet)
	}
}

func TestRenderPrerequisites(t *testing.T) {
	f := fleet(v1alpha1.ProfilePersistentFleet)
	o := Render(f, 3, 3)
	services, policies, pdbs := OfType[*corev1.Service](o), OfType[*networkingv1.NetworkPolicy](o), OfType[*policyv1.PodDisruptionBudget](o)
	if len(services) != 2 || len(pdbs) != 1 {
		t.Fatalf("services: %d, pdbs: %d", len(services), len(pdbs))
	}
	peers := services[1]
	if peers.Name != "a-peers" || peers.Spec.ClusterIP != corev1.ClusterIPNone || !peers.Spec.PublishNotReadyAddresses {
		t.Errorf("the peer Service must be headless and publish not-ready addresses: %+v", peers.Spec)
	}
	if pdbs[0].Spec.MaxUnavailable == nil || pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB: %+v", pdbs[0].Spec)
	}
	if len(policies) != 2 {
		t.Fatalf("policies: %d", len(policies))
	}
	for _, p := range policies {
		if len(p.Spec.Ingress) != 1 || len(p.Spec.Ingress[0].Ports) != 1 || len(p.Spec.PolicyTypes) != 1 {
			t.Errorf("policy %s must allow one port from one set of peers: %+v", p.Name, p.Spec)
		}
	}
	if port := policies[1].Spec.Ingress[0].Ports[0].Port.IntValue(); port != 7001 || policies[1].Spec.Ingress[0].From[0].PodSelector.MatchLabels[kinds.LabelFleetUID] != "uid-1" {
		t.Errorf("peers policy: only members, on the peer port: %+v", policies[1].Spec)
	}
	for _, obj := range o.All() {
		m := metaOf(obj)
		if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "uid-1" || m.Labels[kinds.LabelManagedBy] != kinds.ManagedBy {
			t.Errorf("%s must be owned by and labelled for its fleet: %+v", m.Name, m)
		}
	}
	r := RenderReservation(f)
	if len(r.OwnerReferences) != 0 || r.Spec.FleetUID != "uid-1" {
		t.Errorf("the reservation binds the fleet's UID and has no owner: %+v", r.ObjectMeta)
	}
	if ReservationName(v1alpha1.BucketSpec{Name: "bkt"}) == ReservationName(f.Spec.Bucket) {
		t.Error("the same bucket name at another endpoint is another reservation")
	}
}

func metaOf(o any) *metav1.ObjectMeta {
	switch x := o.(type) {
	case *corev1.Service:
		return &x.ObjectMeta
	case *appsv1.StatefulSet:
		return &x.ObjectMeta
	case *appsv1.Deployment:
		return &x.ObjectMeta
	}
	if p, ok := o.(interface{ GetObjectMeta() metav1.Object }); ok {
		m := p.GetObjectMeta().(*metav1.ObjectMeta)
		return m
	}
	return &metav1.ObjectMeta{}
}

// Fields the API server defaults are no drift; a hand edit of a field the operator sets is.
func TestMatches(t *testing.T) {
	f := fleet(v1alpha1.ProfilePersistentFleet)
	desired := Render(f, 3, 3).StatefulSet
	observed := desired.DeepCopy()
	observed.TypeMeta = metav1.TypeMeta{}
	observed.ResourceVersion, observed.Generation = "42", 7
	observed.Spec.RevisionHistoryLimit = new(int32)
	observed.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	observed.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	observed.Status.Replicas = 3
	if !Matches(desired, observed) {
		t.Fatal("defaults and status must not count as drift")
	}
	observed.Spec.Template.Spec.Containers[0].Image = "someone/else:latest"
	if Matches(desired, observed) {
		t.Fatal("a hand-edited image must count as drift")
	}
	if Matches(desired, nil) {
		t.Fatal("a missing object never matches")
	}
}

// TestMembersRunHardened: whatever the profile, members get no Kubernetes API token unless the
// fleet asks, a read-only root filesystem, and a bounded scratch emptyDir where temporary files go.
func TestMembersRunHardened(t *testing.T) {
	for _, f := range []*v1alpha1.CelldFleet{fleet(v1alpha1.ProfileBucket), fleet(v1alpha1.ProfilePersistentFleet)} {
		for _, ask := range []*bool{nil, ptrTo(false), ptrTo(true)} {
			f.Spec.AutomountServiceAccountToken = ask
			spec := renderPodTemplate(f).Spec
			want := ask != nil && *ask
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken != want {
				t.Errorf("%s, automountServiceAccountToken %v: rendered %v, want %v", f.Spec.Profile, ask, spec.AutomountServiceAccountToken, want)
			}
			c := spec.Containers[0]
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: the root filesystem must be read-only: %+v", f.Spec.Profile, sc)
			}
			// A fresh disk is root's: without a group of the Pod's, a non-root member cannot write it.
			if psc := spec.SecurityContext; psc == nil || psc.FSGroup == nil || *psc.FSGroup != DataGroup ||
				psc.FSGroupChangePolicy == nil || *psc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch {
				t.Errorf("%s: the Pod must give its volumes to group %d, changed only on a mismatch: %+v", f.Spec.Profile, DataGroup, psc)
			}
			mounted := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = m.MountPath
			}
			if mounted[ScratchVolume] != ScratchMountPath || mounted[kinds.DataVolume] != DataMountPath {
				t.Errorf("%s: mounts %v, want scratch at %s and data at %s", f.Spec.Profile, mounted, ScratchMountPath, DataMountPath)
			}
			var scratch *corev1.Volume
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == ScratchVolume {
					scratch = &spec.Volumes[i]
				}
			}
			if scratch == nil || scratch.EmptyDir == nil || scratch.EmptyDir.SizeLimit == nil || scratch.EmptyDir.SizeLimit.Cmp(ScratchLimit) != 0 {
				t.Errorf("%s: scratch volume %+v, want an emptyDir of %s", f.Spec.Profile, scratch, ScratchLimit.String())
			}
		}
	}
}

// TestRestartIsATemplateChange: a fleet's restart annotation reaches the members' Pod template of
// either workload, so the workload's controller rolls them; a workload without it, or with an
// older restart, counts as drift.
func TestRestartIsATemplateChange(t *testing.T) {
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		f := fleet(profile)
		before := workloadOf(Render(f, 3, 3))
		f.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: "2026-11-30T18:00:00Z"}
		after := workloadOf(Render(f, 3, 3))
		if got := templateOf(after).Annotations[v1alpha1.AnnotationRestartedAt]; got != "2026-11-30T18:00:00Z" {
			t.Errorf("%s: the Pod template carries restartedAt %q", profile, got)
		}
		if Matches(after, before) {
			t.Errorf("%s: a workload rendered before the restart must count as drift", profile)
		}
		f.Annotations[v1alpha1.AnnotationRestartedAt] = "2026-11-30T19:00:00Z"
		if Matches(workloadOf(Render(f, 3, 3)), after) {
			t.Errorf("%s: a second restart must count as drift", profile)
		}
	}
}

func workloadOf(o *Objects) any {
	if o.StatefulSet != nil {
		return o.StatefulSet
	}
	return o.Deployment
}

func templateOf(w any) corev1.PodTemplateSpec {
	if s, ok := w.(*appsv1.StatefulSet); ok {
		return s.Spec.Template
	}
	return w.(*appsv1.Deployment).Spec.Template
}

// TestEveryOwnedKindRenders: an owned kind added to the table is rendered by its own file, and
// nothing is rendered that the table does not call owned.
func TestEveryOwnedKindRenders(t *testing.T) {
	for _, r := range kinds.Table {
		if _, ok := renderers[r.Kind]; ok != (r.Owned && !r.Workload) {
			t.Errorf("kind %s: owned %t, workload %t, renderer %t", r.Kind, r.Owned, r.Workload, ok)
		}
	}
	f := fleet(v1alpha1.ProfilePersistentFleet)
	for _, obj := range Render(f, 3, 3).All() {
		if r, ok := kinds.Lookup(kinds.Of(obj)); !ok || !r.Owned {
			t.Errorf("rendered %T, not an owned kind of the table", obj)
		}
	}
}

// TestAllListsTheOneWorkloadLast: every rendered object is applied, the workload last (after
// the Services, policies and budget it needs), and only the workload the fleet runs: never a
// missing one, never an empty one beside it.
func TestAllListsTheOneWorkloadLast(t *testing.T) {
	for _, tc := range []struct {
		profile  v1alpha1.Profile
		workload v1alpha1.WorkloadKind
		kind     kinds.Kind
	}{
		{v1alpha1.ProfilePersistentFleet, "", kinds.StatefulSet},
		{v1alpha1.ProfileBucket, "", kinds.Deployment},
		{v1alpha1.ProfileBucket, v1alpha1.WorkloadOrderedStatefulSet, kinds.StatefulSet},
	} {
		f := fleet(tc.profile)
		f.Spec.Workload = tc.workload
		o := Render(f, 3, 3)
		all := o.All()
		if len(all) != len(o.Owned)+1 {
			t.Fatalf("%s %s: %d objects, want the %d owned and the workload", tc.profile, tc.workload, len(all), len(o.Owned))
		}
		last := all[len(all)-1]
		if last == nil || reflect.ValueOf(last).IsNil() || kinds.Of(last) != tc.kind {
			t.Errorf("%s %s: last object %T (%v), want the %s", tc.profile, tc.workload, last, last, tc.kind)
		}
		for _, obj := range all[:len(all)-1] {
			if k := kinds.Of(obj); k == kinds.StatefulSet || k == kinds.Deployment {
				t.Errorf("%s %s: workload %s before the end", tc.profile, tc.workload, k)
			}
		}
	}
}

// TestPortsDefaultOnlyWhenLeftOut: a port the spec leaves out is the default, and one it gives
// is that one, on the Services and the policies alike.
func TestPortsDefaultOnlyWhenLeftOut(t *testing.T) {
	for _, tc := range []struct {
		client, peer         int32
		wantClient, wantPeer int32
	}{
		{0, 0, defaultClientPort, defaultPeerPort},
		{9000, 0, 9000, defaultPeerPort},
		{0, 9001, defaultClientPort, 9001},
		{9000, 9001, 9000, 9001},
	} {
		f := fleet(v1alpha1.ProfilePersistentFleet)
		f.Spec.Network.ClientPort, f.Spec.Network.PeerPort = tc.client, tc.peer
		o := Render(f, 3, 3)
		services, policies := OfType[*corev1.Service](o), OfType[*networkingv1.NetworkPolicy](o)
		if len(services) != 2 || len(policies) != 2 {
			t.Fatalf("services %d, policies %d", len(services), len(policies))
		}
		got := []int32{services[0].Spec.Ports[0].Port, services[1].Spec.Ports[0].Port,
			int32(policies[0].Spec.Ingress[0].Ports[0].Port.IntValue()), int32(policies[1].Spec.Ingress[0].Ports[0].Port.IntValue())}
		want := []int32{tc.wantClient, tc.wantPeer, tc.wantClient, tc.wantPeer}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("spec ports %d/%d: client Service, peer Service, client policy, peer policy %v; want %v", tc.client, tc.peer, got, want)
		}
	}
}

// TestSettledSizeRecordedFromZero: the size whose rollout completed is recorded whatever it is,
// zero included (a hibernated fleet's workload settled at no member); -1 records none.
func TestSettledSizeRecordedFromZero(t *testing.T) {
	f := fleet(v1alpha1.ProfilePersistentFleet)
	for _, tc := range []struct {
		settled int32
		want    string
		set     bool
	}{{0, "0", true}, {1, "1", true}, {-1, "", false}} {
		v, set := Render(f, 0, tc.settled).StatefulSet.Annotations[kinds.AnnotationSettled]
		if v != tc.want || set != tc.set {
			t.Errorf("settled %d: annotation %q (set %t), want %q (set %t)", tc.settled, v, set, tc.want, tc.set)
		}
	}
}
