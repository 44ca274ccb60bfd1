package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/reservation"
)

// TestBucketSpellingsOneBucket: a bucket bound to a fleet in one namespace is refused to fleets
// in another namespace, each with its own operator, that spell the same bucket differently
// (the empty Amazon default against explicit Amazon endpoints with case, port, trailing slash
// and dot, region host, virtual-host and path style), and to one that names it after a
// reservation made under the operator's old naming; none of them ever gets a workload. The same
// bucket name at another store is not refused, nor is a bucket named like another bucket's
// reservation under the old naming.
func TestBucketSpellingsOneBucket(t *testing.T) {
	t.Parallel()
	first, second := newFixture(t), newFixture(t)
	first.startOperator()
	// A reservation under the old naming (the bucket's raw name) of a bucket no fleet runs on
	// still holds it after the upgrade. It exists before the operator that sees its bucket asked
	// for starts, as it does after an upgrade.
	legacy := second.bucket("legacy")
	// It is made as the operator of the old naming made it: its managed-by label, its field manager.
	held := &v1alpha1.CelldReservation{
		ObjectMeta: metav1.ObjectMeta{Name: reservation.LegacyName(v1alpha1.BucketSpec{Name: legacy}),
			Labels: map[string]string{kinds.LabelManagedBy: kinds.ManagedBy}},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "gone", FleetUID: types.UID("00000000-0000-0000-0000-00000000cafe"),
			Profile: v1alpha1.ProfileBucket, Bucket: v1alpha1.BucketSpec{Name: legacy, Region: "us-east-1"}},
	}
	if _, err := suite.celld.CelldV1alpha1().CelldReservations(first.ns).Create(first.ctx, held, metav1.CreateOptions{FieldManager: kinds.FieldManager}); err != nil {
		t.Fatal(err)
	}
	second.startOperator()
	name := first.bucket("spelled")
	owner := first.newFleet("owner", v1alpha1.ProfileBucket, 1)
	owner.Spec.Bucket = v1alpha1.BucketSpec{Name: name, Region: "us-east-1"}
	owner = first.create(owner)
	first.waitConverged(owner.Name)

	spellings := []string{
		"https://s3.amazonaws.com",
		"HTTPS://S3.AmazonAWS.com:443/",
		"http://s3.us-east-1.amazonaws.com.:80//",
		"https://s3.eu-west-1.amazonaws.com",
		"https://" + name + ".s3.amazonaws.com",
		"https://s3.amazonaws.com/" + name,
	}
	var rivals []*v1alpha1.CelldFleet
	for i, e := range spellings {
		fl := second.newFleet(fmt.Sprintf("rival-%d", i), v1alpha1.ProfileBucket, 1)
		fl.Spec.Bucket = v1alpha1.BucketSpec{Name: name, Region: "eu-west-1", Endpoint: e}
		rivals = append(rivals, second.create(fl))
	}
	late := second.newFleet("late", v1alpha1.ProfileBucket, 1)
	late.Spec.Bucket = v1alpha1.BucketSpec{Name: legacy, Region: "us-east-1", Endpoint: "https://s3.us-east-1.amazonaws.com/"}
	rivals = append(rivals, second.create(late))
	// The same name at another store is another bucket.
	other := second.newFleet("elsewhere", v1alpha1.ProfileBucket, 1)
	other.Spec.Bucket = v1alpha1.BucketSpec{Name: name, Region: "us-east-1", Endpoint: "https://minio.example.com:9000"}
	other = second.create(other)

	// A bucket named like a reservation the old naming derived for another bucket (name, dash,
	// hash of the endpoint) is another bucket: its fleet converges, on a reservation of its own.
	atStore := v1alpha1.BucketSpec{Name: first.bucket("store"), Region: "us-east-1", Endpoint: "https://minio.example.com"}
	oldName := reservation.LegacyName(atStore)
	if _, err := suite.celld.CelldV1alpha1().CelldReservations(first.ns).Create(first.ctx, &v1alpha1.CelldReservation{
		ObjectMeta: metav1.ObjectMeta{Name: oldName, Labels: map[string]string{kinds.LabelManagedBy: kinds.ManagedBy}},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "gone", FleetUID: types.UID("00000000-0000-0000-0000-00000000beef"),
			Profile: v1alpha1.ProfileBucket, Bucket: atStore},
	}, metav1.CreateOptions{FieldManager: kinds.FieldManager}); err != nil {
		t.Fatal(err)
	}
	namesake := first.newFleet("namesake", v1alpha1.ProfileBucket, 1)
	namesake.Spec.Bucket = v1alpha1.BucketSpec{Name: oldName, Region: "us-east-1"}
	namesake = first.create(namesake)

	for _, r := range rivals {
		fl := second.waitFleet(r.Name, time.Minute, "refused: BucketReserved", bucketRefused)
		t.Logf("%s (%s): %s", r.Name, r.Spec.Bucket.Endpoint, condition(fl, v1alpha1.ConditionDegraded).Message)
	}
	second.waitConverged(other.Name)
	first.waitConverged(namesake.Name)
	if r := first.reservation(namesake); r.Spec.FleetUID != namesake.UID || r.Name == oldName {
		t.Errorf("the fleet on bucket %s is bound by %s to %s; want its own reservation", oldName, r.Name, r.Spec.FleetUID)
	}
	// Refused for good: after several resyncs still nothing.
	time.Sleep(5 * time.Second)
	for _, r := range rivals {
		if err := second.refusedGetsNothing(r); err != nil {
			t.Error(err)
		}
		second.waitFleet(r.Name, time.Second, "still refused", bucketRefused)
	}
	if r := first.reservation(owner); r.Spec.FleetUID != owner.UID {
		t.Errorf("the bucket is bound to %s, want the owner %s", r.Spec.FleetUID, owner.UID)
	}
	list, err := suite.celld.CelldV1alpha1().CelldReservations(second.ns).List(second.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		if r.Spec.Bucket.Name == name && r.Spec.Bucket.Endpoint != other.Spec.Bucket.Endpoint || r.Spec.Bucket.Name == legacy {
			t.Errorf("reservation %s binds %+v to %s: a refused fleet made a reservation", r.Name, r.Spec.Bucket, r.Spec.FleetName)
		}
	}
}

// TestUndecodableFleetIsolated: while three fleets scale, a fleet with the largest durations
// admission allows converges, and a fleet the operator's types cannot decode (created through a
// CRD relaxed for the moment, as an object stored before the CRD tightened would be) is
// reported (a Warning Event on it, a log line naming it, celld_undecodable_objects_total) and
// stops nothing: the three converge, and converge again under an operator started with the bad
// fleet already stored. A fleet whose status the types cannot decode is served regardless.
func TestUndecodableFleetIsolated(t *testing.T) {
	f := newFixture(t)
	op := f.startOperator()
	var fleets []*v1alpha1.CelldFleet
	for i := 0; i < 3; i++ {
		fleets = append(fleets, f.create(f.newFleet(fmt.Sprintf("busy-%d", i), v1alpha1.ProfileBucket, 1)))
	}
	for _, fl := range fleets {
		f.waitConverged(fl.Name)
	}
	longest := f.newFleet("longest", v1alpha1.ProfileBucket, 1)
	longest.Spec.Capacity.ScaleInStabilization = duration(168 * time.Hour)
	longest.Spec.Healing.UnreachableGracePeriod = duration(168 * time.Hour)
	longest = f.create(longest)

	var wg sync.WaitGroup
	for _, fl := range fleets {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			f.update(name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
		}(fl.Name)
	}
	bad := f.createUndecodable("undecodable", `{"scaleInStabilization":"2562048h"}`)
	wg.Wait()
	for _, fl := range fleets {
		f.waitConverged(fl.Name)
	}
	f.waitConverged(longest.Name)

	// A status the types cannot decode, written past admission if admission lets it through.
	statusBad := f.create(f.newFleet("bad-status", v1alpha1.ProfileBucket, 1))
	f.waitConverged(statusBad.Name)
	patch := `{"status":{"conditions":[{"type":"Stale","status":"True","reason":"Hand","message":"","lastTransitionTime":"2026-01-01t00:00:00z"}]}}`
	_, statusErr := f.fleets().Patch(f.ctx, statusBad.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	t.Logf("a lower-case condition time written to a fleet's status: %v", statusErr)
	// The API server stores it (the client then fails to decode its own answer): the operator
	// must serve the fleet without its status, and say so.
	statusStored := statusErr == nil || strings.Contains(statusErr.Error(), "parsing time")

	// Reported: an Event on the object, the metric, a log line with its namespace and name.
	f.waitEvent(bad, "Undecodable")
	if n, series := op.counter(t, "celld_operator_undecodable_objects_total"); n == 0 || series[`{handling="skipped",kind="CelldFleet"}`] == 0 {
		t.Errorf("celld_operator_undecodable_objects_total = %v %s, want the skipped fleet counted", n, formatSeries(series))
	}
	if statusStored {
		err := wait.PollUntilContextTimeout(f.ctx, poll, 30*time.Second, true, func(context.Context) (bool, error) {
			_, series := op.counter(t, "celld_operator_undecodable_objects_total")
			return series[`{handling="status_dropped",kind="CelldFleet"}`] > 0, nil
		})
		if err != nil {
			t.Errorf("the fleet whose status does not decode was never reported as served without it")
		}
	}
	logged, _ := os.ReadFile(op.LogPath)
	if !strings.Contains(string(logged), `"namespace":"`+f.ns+`"`) || !strings.Contains(string(logged), `"name":"`+bad+`"`) ||
		!strings.Contains(string(logged), "does not decode") {
		t.Errorf("no log line names %s/%s as undecodable", f.ns, bad)
	}
	if _, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, bad, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the undecodable fleet got a workload: %v", err)
	}

	// A new operator starts with the bad fleet stored: its caches sync and it serves the others.
	op.stop(t)
	f.startOperator()
	if statusStored {
		// The operator writes the status it decides over the one that does not decode: until
		// then no typed client can read the fleet, the updates below included.
		err := wait.PollUntilContextTimeout(f.ctx, poll, 30*time.Second, true, func(context.Context) (bool, error) {
			_, err := f.fleets().Get(f.ctx, statusBad.Name, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("the fleet whose status did not decode still does not, 30s after the operator started")
		}
	}
	for _, fl := range fleets {
		f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 3 })
	}
	f.update(statusBad.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 2 })
	for _, fl := range append(fleets, statusBad) {
		f.waitConverged(fl.Name)
	}
}

// createUndecodable stores a fleet whose spec.capacity the schema now refuses: it relaxes the
// CRD's bounds on scaleInStabilization for the moment of the create, then restores them. The
// fleet is deleted at the end of the test.
func (f *fixture) createUndecodable(name, capacity string) string {
	f.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		f.t.Fatal(err)
	}
	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	field := func(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		capacity := spec.Properties["capacity"]
		p := capacity.Properties["scaleInStabilization"]
		return &p
	}
	set := func(crd *apiextensionsv1.CustomResourceDefinition, p apiextensionsv1.JSONSchemaProps) {
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		capacity := spec.Properties["capacity"]
		capacity.Properties["scaleInStabilization"] = p
		spec.Properties["capacity"] = capacity
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	update := func(change func(*apiextensionsv1.CustomResourceDefinition)) {
		for {
			crd, err := crds.Get(context.Background(), "celldfleets.celld.io", metav1.GetOptions{})
			if err != nil {
				f.t.Fatal(err)
			}
			change(crd)
			if _, err = crds.Update(context.Background(), crd, metav1.UpdateOptions{}); err == nil {
				return
			} else if !apierrors.IsConflict(err) {
				f.t.Fatalf("update the CRD: %v", err)
			}
		}
	}
	crd, err := crds.Get(f.ctx, "celldfleets.celld.io", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	original := *field(crd).DeepCopy()
	restore := sync.OnceFunc(func() { update(func(c *apiextensionsv1.CustomResourceDefinition) { set(c, original) }) })
	f.t.Cleanup(restore)
	relaxed := *original.DeepCopy()
	relaxed.XValidations, relaxed.MaxLength = nil, nil
	update(func(c *apiextensionsv1.CustomResourceDefinition) { set(c, relaxed) })

	var capMap map[string]any
	if err := json.Unmarshal([]byte(capacity), &capMap); err != nil {
		f.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "celld.io/v1alpha1", "kind": "CelldFleet",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"profile": "Bucket", "members": 1, "image": image, "capacity": capMap,
			"bucket": map[string]any{"name": f.bucket(name), "region": "us-east-1"}}})
	rc := suite.celld.CelldV1alpha1().RESTClient()
	// The API server takes a moment to serve the relaxed schema.
	err = wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := rc.Post().Namespace(f.ns).Resource("celldfleets").Body(body).Do(ctx).Error()
		if err != nil {
			f.t.Logf("create %s: %v", name, err)
		}
		return err == nil, nil
	})
	if err != nil {
		f.t.Fatalf("the relaxed CRD never admitted %s", body)
	}
	restore()
	f.t.Cleanup(func() { f.deleteFleet(name, false) })
	f.t.Logf("stored fleet %s with capacity %s", name, capacity)
	return name
}

// waitEvent waits for an Event with reason on the fleet name.
func (f *fixture) waitEvent(name, reason string) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := suite.kube.CoreV1().Events(f.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == "Warning" {
				f.t.Logf("event on %s: %s", name, e.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		f.t.Fatalf("no Warning event %s on %s within a minute", reason, name)
	}
}

// TestNameLimits: admission refuses fleet names whose derived objects would be invalid (over 52
// characters, the StatefulSet's revision label limit, or not a DNS label starting with a letter)
// and bucket names S3 refuses, each with a message that says the limit; a 52-character
// PersistentFleet converges. A reservation the API server refuses (here by a
// ValidatingAdmissionPolicy) ends in Degraded=SpecRefused within seconds, and no workload.
func TestNameLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	refused := []struct {
		name, bucket, want string
	}{
		{name: strings.Repeat("a", 63), want: "at most 52 characters"},
		{name: strings.Repeat("a", 53), want: "at most 52 characters"},
		{name: "1fleet", want: "DNS label starting with a letter"},
		{name: "my.fleet", want: "DNS label starting with a letter"},
		{name: "ok", bucket: "ab-.cd", want: "spec.bucket.name"},
		{name: "ok", bucket: "ab.-cd", want: "spec.bucket.name"},
		{name: "ok", bucket: "a..b", want: "spec.bucket.name"},
		{name: "ok", bucket: "192.168.5.4", want: "IP address"},
		{name: "ok", bucket: "xn--data", want: "xn--"},
		{name: "ok", bucket: "data-s3alias", want: "-s3alias"},
		{name: "ok", bucket: "data--ol-s3", want: "--ol-s3"},
	}
	for _, c := range refused {
		fl := f.newFleet(c.name, v1alpha1.ProfileBucket, 1)
		fl.Spec.Bucket.Name = f.bucket("names")
		if c.bucket != "" {
			fl.Spec.Bucket.Name = c.bucket
		}
		_, err := f.fleets().Create(f.ctx, fl, metav1.CreateOptions{})
		if err == nil {
			f.deleteFleet(fl.Name, false)
			t.Errorf("fleet %q with bucket %q admitted; want refused (%s)", c.name, fl.Spec.Bucket.Name, c.want)
			continue
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("fleet %q bucket %q: %v; want Invalid saying %q", c.name, fl.Spec.Bucket.Name, err, c.want)
			continue
		}
		t.Logf("refused: %v", err)
	}
	longest := f.newFleet("l"+strings.Repeat("o", 50)+"g", v1alpha1.ProfilePersistentFleet, 1)
	longest = f.create(longest)
	fl := f.waitConverged(longest.Name)
	t.Logf("a %d-character PersistentFleet converged: %s", len(fl.Name), fl.Status.State)

	// A reservation refused by the API server: Degraded in seconds, nothing applied.
	deny := "celld-deny-reservations-" + f.id
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: deny},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"celld.io"}, APIVersions: []string{"*"}, Resources: []string{"celldreservations"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!object.spec.bucket.name.startsWith('denied-')",
				Message:    "reservations of denied- buckets are refused in this namespace",
			}},
		},
	}
	vap := suite.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	if _, err := vap.Create(f.ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vap.Delete(context.Background(), deny, metav1.DeleteOptions{}) })
	bindings := suite.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: deny},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        deny,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.ns}}},
		},
	}
	if _, err := bindings.Create(f.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(context.Background(), deny, metav1.DeleteOptions{}) })
	// The policy takes effect once the API server has loaded it: probe with a dry run.
	probe := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "probe", FleetUID: "probe", Profile: v1alpha1.ProfileBucket,
			Bucket: v1alpha1.BucketSpec{Name: "denied-probe", Region: "us-east-1"}}}
	err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	if err != nil {
		t.Fatal("the policy never took effect")
	}
	denied := f.newFleet("denied", v1alpha1.ProfileBucket, 1)
	denied.Spec.Bucket.Name = "denied-" + f.id
	created := time.Now()
	denied = f.create(denied)
	fl = f.waitFleet(denied.Name, 15*time.Second+machine.ProgressInterval, "Degraded=SpecRefused naming the reservation", func(fl *v1alpha1.CelldFleet) bool {
		d := condition(fl, v1alpha1.ConditionDegraded)
		return fl.Status.ObservedGeneration == fl.Generation && d.Status == metav1.ConditionTrue && d.Reason == machine.ReasonSpecRefused &&
			strings.Contains(d.Message, "CelldReservation/") && strings.Contains(d.Message, "denied- buckets are refused")
	})
	t.Logf("Degraded %s after creation: %s", time.Since(created).Round(100*time.Millisecond), condition(fl, v1alpha1.ConditionDegraded).Message)
	if _, err := suite.kube.AppsV1().Deployments(f.ns).Get(f.ctx, denied.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the fleet whose reservation was refused got a workload: %v", err)
	}
}
