package machine

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// revisionHashLen is the longest hash the StatefulSet controller appends to the StatefulSet's name
// in a member's controller-revision-hash label (a safe-encoded 32-bit FNV hash).
const revisionHashLen = 10

// maxFleetName is the longest fleet name whose derived names and labels are all valid: the
// controller-revision-hash label, <name>-<hash>, is the tightest.
const maxFleetName = validation.LabelValueMaxLength - 1 - revisionHashLen

// TestLongestAdmittedNameRendersValidObjects: a fleet with the longest name admission allows
// renders only valid names and label values, including what the StatefulSet controller derives
// (members up to ordinal 999, the revision label); one character more would break the revision
// label, and the CRD's rule says the same limit.
func TestLongestAdmittedNameRendersValidObjects(t *testing.T) {
	name := "f" + strings.Repeat("x", maxFleetName-1)
	for _, c := range []struct {
		profile  v1alpha1.Profile
		workload v1alpha1.WorkloadKind
	}{{v1alpha1.ProfilePersistentFleet, ""}, {v1alpha1.ProfileBucket, v1alpha1.WorkloadDeployment}, {v1alpha1.ProfileBucket, v1alpha1.WorkloadOrderedStatefulSet}} {
		f := fleet(c.profile)
		f.Name, f.UID, f.Spec.Workload = name, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", c.workload
		f.Spec.Members = 1000
		objs := render.Render(f, f.Spec.Members, f.Spec.Members)
		check := func(what string, errs []string) {
			if len(errs) > 0 {
				t.Errorf("%s %s: %s", c.profile, what, strings.Join(errs, "; "))
			}
		}
		labels := func(what string, m metav1.ObjectMeta) {
			for k, v := range m.Labels {
				check(what+" label "+k, append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...))
			}
		}
		for _, s := range render.OfType[*corev1.Service](objs) {
			check("Service "+s.Name, validation.IsDNS1035Label(s.Name))
			labels("Service", s.ObjectMeta)
		}
		for _, o := range objs.Owned {
			// Every other kind's names are DNS subdomains; a Service's, checked above, a label.
			what := string(kinds.Of(o))
			check(what+" "+o.GetName(), validation.IsDNS1123Subdomain(o.GetName()))
			labels(what, metav1.ObjectMeta{Labels: o.GetLabels()})
		}
		if s := objs.StatefulSet; s != nil {
			check("StatefulSet", validation.IsDNS1123Subdomain(s.Name))
			check("member name", validation.IsDNS1123Label(s.Name+"-999"))
			check("controller-revision-hash", validation.IsValidLabelValue(s.Name+"-"+strings.Repeat("z", revisionHashLen)))
			labels("StatefulSet", s.ObjectMeta)
			labels("member", s.Spec.Template.ObjectMeta)
			for _, v := range s.Spec.VolumeClaimTemplates {
				check("claim", validation.IsDNS1123Subdomain(v.Name+"-"+s.Name+"-999"))
			}
			if len(validation.IsValidLabelValue(s.Name+"x-"+strings.Repeat("z", revisionHashLen))) == 0 {
				t.Errorf("a name one character longer still fits the revision label: the limit is not tight")
			}
		}
		if d := objs.Deployment; d != nil {
			check("Deployment", validation.IsDNS1123Subdomain(d.Name))
			labels("member", d.Spec.Template.ObjectMeta)
		}
		r := render.RenderReservation(f)
		check("reservation", validation.IsDNS1123Subdomain(r.Name))
		labels("reservation", r.ObjectMeta)
	}
	crd, err := os.ReadFile("../deploy/crds/celld.io_celldfleets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if rule := "size(self.metadata.name) <= 52"; maxFleetName != 52 || !strings.Contains(string(crd), rule) {
		t.Errorf("the CRD must refuse fleet names over %d characters (rule %q)", maxFleetName, rule)
	}
}
