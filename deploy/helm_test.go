package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const chart = "helm/celld-operator"

// objects splits a multi-document YAML stream into objects keyed Kind/namespace/name.
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		key := fmt.Sprintf("%s/%v/%v", obj["kind"], meta["namespace"], meta["name"])
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		out[key] = obj
	}
	return out
}

// testedKube is the Kubernetes version the chart is rendered for: the one of the local control
// plane, and within the chart's kubeVersion.
const testedKube = "1.37.0"

// helmOnly are the labels the chart adds to every object; what deploy/ sets must be there too.
var helmOnly = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// normalize takes out what may differ between the chart and deploy/: Helm's own labels, and the
// image's tag (deploy/ names :latest, a released chart its version).
func normalize(obj map[string]any) {
	if meta, ok := obj["metadata"].(map[string]any); ok {
		if labels, ok := meta["labels"].(map[string]any); ok {
			for _, l := range helmOnly {
				delete(labels, l)
			}
			if len(labels) == 0 {
				delete(meta, "labels")
			}
		}
		// The chart keeps its CRDs when it is uninstalled; deploy/ has no such notion.
		if annotations, ok := meta["annotations"].(map[string]any); ok && obj["kind"] == "CustomResourceDefinition" {
			delete(annotations, "helm.sh/resource-policy")
		}
	}
	if obj["kind"] != "Deployment" {
		return
	}
	spec := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, c := range spec["containers"].([]any) {
		c := c.(map[string]any)
		if image, ok := c["image"].(string); ok {
			c["image"], _, _ = strings.Cut(image, ":")
		}
	}
}

func helmTemplate(t *testing.T, args ...string) string {
	t.Helper()
	// The test hooks are the chart's own: deploy/ installs no test.
	return run(t, ".", tool(t, "helm"), append([]string{"template", "celld-operator", chart, "--namespace", "celld-system", "--skip-tests",
		"--kube-version", testedKube}, args...)...)
}

// sameObjects compares two sets of objects, kinds in skip apart.
func sameObjects(t *testing.T, what string, chartObjs, deployObjs map[string]map[string]any, skip ...string) {
	t.Helper()
	var keys []string
	for k := range deployObjs {
		keys = append(keys, k)
	}
	for k := range chartObjs {
		if _, ok := deployObjs[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	compared := 0
	for _, k := range keys {
		if slices.Contains(skip, strings.SplitN(k, "/", 2)[0]) {
			continue
		}
		c, d := chartObjs[k], deployObjs[k]
		switch {
		case c == nil:
			t.Errorf("%s: deploy/ has %s, the chart does not", what, k)
		case d == nil:
			t.Errorf("%s: the chart has %s, deploy/ does not", what, k)
		default:
			normalize(c)
			normalize(d)
			if !reflect.DeepEqual(c, d) {
				cj, _ := json.MarshalIndent(c, "", "  ")
				dj, _ := json.MarshalIndent(d, "", "  ")
				t.Errorf("%s: %s drifted from deploy/:\nchart:\n%s\ndeploy/:\n%s", what, k, cj, dj)
			}
			compared++
		}
	}
	if compared < 3 {
		t.Errorf("%s: %d objects compared", what, compared)
	}
}

// TestChartMatchesManifests: the chart, at its default values and in each namespace mode,
// renders the objects deploy/ installs (its Namespace apart: Helm installs into one), so the two
// never drift. Its monitoring kit is deploy/monitoring/'s, and what it ships as is (the CRDs, the
// rules and the dashboard) is a copy of deploy/'s.
func TestChartMatchesManifests(t *testing.T) {
	kubectl := tool(t, "kubectl")
	for _, c := range []struct {
		name, dir string
		set       []string
	}{
		{"cluster-wide", ".", nil},
		{"namespaced", "namespaced", []string{"--set", "namespaceMode=namespaced", "--set", "watchNamespace=celld-fleets"}},
	} {
		rendered := objects(t, helmTemplate(t, append([]string{"--include-crds"}, c.set...)...))
		manifests := objects(t, run(t, ".", kubectl, "kustomize", c.dir))
		sameObjects(t, c.name, rendered, manifests, "Namespace")
	}

	all := []string{"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.metricsReader.enabled=true", "--set", "monitoring.dashboard.enabled=true"}
	rendered := objects(t, helmTemplate(t, all...))
	kit := objects(t, run(t, ".", kubectl, "kustomize", "monitoring"))
	monitoring := map[string]map[string]any{}
	for k, o := range rendered {
		if _, ok := kit[k]; ok {
			monitoring[k] = o
		}
	}
	sameObjects(t, "monitoring", monitoring, kit)
	dash, err := os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	cm := rendered["ConfigMap/celld-system/celld-operator-dashboard"]
	if cm == nil || strings.TrimSpace(cm["data"].(map[string]any)["celld-operator.json"].(string)) != strings.TrimSpace(string(dash)) {
		t.Errorf("the chart's dashboard ConfigMap does not hold monitoring/dashboard.json")
	}

	copies := map[string]string{"monitoring/prometheus_rule.yaml": chart + "/files/prometheus_rule.yaml", "monitoring/dashboard.json": chart + "/files/dashboard.json"}
	crds, _ := filepath.Glob("crds/*.yaml")
	for _, f := range crds {
		copies[f] = filepath.Join(chart, "files", f)
	}
	shipped, _ := filepath.Glob(chart + "/files/crds/*.yaml")
	if len(shipped) != len(crds) || len(crds) == 0 {
		t.Errorf("the chart ships CRDs %v, deploy/ has %v: run hack/chart-sync.sh", shipped, crds)
	}
	for src, dst := range copies {
		a, errA := os.ReadFile(src)
		b, errB := os.ReadFile(dst)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not a copy of deploy/%s (%v, %v): run hack/chart-sync.sh", dst, src, errA, errB)
		}
	}
}

// TestChartLintAndValues: helm lint passes in each mode, and the values change what they name.
func TestChartLintAndValues(t *testing.T) {
	helm := tool(t, "helm")
	run(t, ".", helm, "lint", "--strict", chart)
	run(t, ".", helm, "lint", "--strict", chart, "--set", "namespaceMode=namespaced", "--set", "watchNamespace=team")

	objs := objects(t, helmTemplate(t, "--set", "image.repository=registry.example/celld", "--set", "image.tag=v9.9.9",
		"--set", "replicas=3", "--set", "resources.limits.memory=1Gi", "--set", "metrics.enabled=false"))
	dep := objs["Deployment/celld-system/celld-operator"]
	if dep == nil {
		t.Fatal("no Deployment rendered")
	}
	spec := dep["spec"].(map[string]any)
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	if c["image"] != "registry.example/celld:v9.9.9" || spec["replicas"] != float64(3) {
		t.Errorf("image %v, replicas %v: want registry.example/celld:v9.9.9 and 3", c["image"], spec["replicas"])
	}
	if mem := c["resources"].(map[string]any)["limits"].(map[string]any)["memory"]; mem != "1Gi" {
		t.Errorf("memory limit %v, want 1Gi", mem)
	}
	if args := fmt.Sprint(c["args"]); !strings.Contains(args, "--metrics-bind-address=0") {
		t.Errorf("metrics disabled, args %s", args)
	}
	if _, ok := objs["Service/celld-system/celld-operator-metrics"]; ok {
		t.Errorf("metrics disabled, yet a metrics Service")
	}

	if _, ok := objs["FlowSchema/<nil>/celld-operator"]; !ok {
		t.Errorf("no FlowSchema at the default values")
	}
	off := objects(t, helmTemplate(t, "--set", "flowControl.enabled=false"))
	for _, k := range []string{"FlowSchema/<nil>/celld-operator", "PriorityLevelConfiguration/<nil>/celld-operator"} {
		if _, ok := off[k]; ok {
			t.Errorf("flowControl disabled, yet %s", k)
		}
	}

	// A namespaced install without the namespace to watch is refused, and so is an unknown mode.
	for set, names := range map[string]string{"namespaceMode=namespaced": "watchNamespaces", "namespaceMode=everywhere": "namespaceMode"} {
		cmd := []string{"template", "celld-operator", chart, "--kube-version", testedKube, "--set", set}
		if out, err := execOut(helm, cmd...); err == nil || !strings.Contains(out, names) {
			t.Errorf("helm template --set %s: %v, want refused naming %s:\n%.300s", set, err, names, out)
		}
	}
}

// TestChartCRDs: the chart's CRDs are templates, so helm upgrade moves them, and each is deploy/'s
// CRD to the last number (the template reads and writes it as YAML), marked to be kept when the
// release goes; they can be left to someone else, and the chart refuses a Kubernetes older than
// the ones it is tested on.
func TestChartCRDs(t *testing.T) {
	helm := tool(t, "helm")
	rendered := helmTemplate(t, "--show-only", "templates/crds.yaml")
	files, err := filepath.Glob("crds/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("deploy/crds: %v %v", files, err)
	}
	want := map[string]any{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := exactJSON(t, raw)
		want[crd["metadata"].(map[string]any)["name"].(string)] = crd
	}
	got := map[string]any{}
	for _, doc := range strings.Split(rendered, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "# Source: celld-operator/templates/crds.yaml")) == "" {
			continue
		}
		crd := exactJSON(t, []byte(doc))
		meta := crd["metadata"].(map[string]any)
		if meta["annotations"].(map[string]any)["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %v is not kept when the release goes: %v", meta["name"], meta["annotations"])
		}
		normalize(crd)
		got[meta["name"].(string)] = crd
	}
	if !reflect.DeepEqual(got, want) {
		for name := range want {
			if !reflect.DeepEqual(got[name], want[name]) {
				g, _ := json.Marshal(got[name])
				w, _ := json.Marshal(want[name])
				t.Errorf("the chart's CRD %s is not deploy/'s:\nchart:   %.600s\ndeploy/: %.600s", name, g, w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("the chart renders %d CRDs, deploy/ has %d", len(got), len(want))
		}
	}
	unkept := helmTemplate(t, "--show-only", "templates/crds.yaml", "--set", "crds.keep=false")
	if strings.Contains(unkept, "resource-policy") {
		t.Errorf("crds.keep=false still keeps the CRDs")
	}
	if out, err := execOut(helm, "template", "celld-operator", chart, "--kube-version", testedKube, "--set", "crds.enabled=false"); err != nil ||
		strings.Contains(out, "kind: CustomResourceDefinition") {
		t.Errorf("crds.enabled=false: %v, and the CRDs rendered %t", err, strings.Contains(out, "kind: CustomResourceDefinition"))
	}
	if out, err := execOut(helm, "template", "celld-operator", chart, "--kube-version", "1.35.9"); err == nil || !strings.Contains(out, "kubeVersion") {
		t.Errorf("Kubernetes 1.35: %v, want the chart's kubeVersion to refuse it:\n%.300s", err, out)
	}
}

// exactJSON reads a YAML object keeping its numbers as written.
func exactJSON(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var out map[string]any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChartWatchNamespaces: a namespaced install manages the namespaces of watchNamespaces and
// watchNamespace, each once: a Role and a RoleBinding in each and nowhere else, and the operator
// told the same list; a namespace that is not a name is refused before anything renders.
func TestChartWatchNamespaces(t *testing.T) {
	helm := tool(t, "helm")
	objs := objects(t, helmTemplate(t, "--set", "namespaceMode=namespaced", "--set", "watchNamespaces={team-b,team-a}",
		"--set", "watchNamespace=team-b"))
	var roles, bindings []string
	for k := range objs {
		switch {
		case strings.HasPrefix(k, "Role/") && strings.HasSuffix(k, "/celld-operator"):
			roles = append(roles, k)
		case strings.HasPrefix(k, "RoleBinding/") && strings.HasSuffix(k, "/celld-operator"):
			bindings = append(bindings, k)
			subject := objs[k]["subjects"].([]any)[0].(map[string]any)
			if subject["namespace"] != "celld-system" || subject["name"] != "celld-operator" {
				t.Errorf("%s binds %v, want the ServiceAccount celld-system/celld-operator", k, subject)
			}
		}
	}
	sort.Strings(roles)
	sort.Strings(bindings)
	if want := []string{"Role/team-a/celld-operator", "Role/team-b/celld-operator"}; !reflect.DeepEqual(roles, want) {
		t.Errorf("Roles %v, want %v", roles, want)
	}
	if want := []string{"RoleBinding/team-a/celld-operator", "RoleBinding/team-b/celld-operator"}; !reflect.DeepEqual(bindings, want) {
		t.Errorf("RoleBindings %v, want %v", bindings, want)
	}
	c := objs["Deployment/celld-system/celld-operator"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if args := c["args"].([]any); !slices.Contains(args, any("--namespace=team-b,team-a")) {
		t.Errorf("the operator's args %v: want --namespace=team-b,team-a", args)
	}
	cluster := objects(t, helmTemplate(t, "--set", "watchNamespaces={team-a}"))
	for k := range cluster {
		if strings.HasPrefix(k, "Role/team-") || strings.HasPrefix(k, "RoleBinding/team-") {
			t.Errorf("a cluster-wide install rendered %s", k)
		}
	}
	for _, bad := range []string{"watchNamespaces={Team-A}", "watchNamespaces={team_a}", "watchNamespace=-a"} {
		if out, err := execOut(helm, "template", "celld-operator", chart, "--kube-version", testedKube, "--set", "namespaceMode=namespaced", "--set", bad); err == nil ||
			!strings.Contains(out, "watchNamespace") {
			t.Errorf("--set %s: err %v, want a refusal naming the value\n%.300s", bad, err, out)
		}
	}
}

// TestChartValuesSchema: values.schema.json refuses a misspelt value at any depth, naming it, and
// a value of the wrong kind; every value values.yaml sets passes it.
func TestChartValuesSchema(t *testing.T) {
	helm := tool(t, "helm")
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"--set", "imagee.tag=v1"}, "additional properties 'imagee' not allowed"},
		{[]string{"--set", "image.tga=v1"}, "additional properties 'tga' not allowed"},
		{[]string{"--set", "monitoring.serviceMonitor.enable=true"}, "additional properties 'enable' not allowed"},
		{[]string{"--set", "podDisruptionBudget.maxUnavailabe=2"}, "additional properties 'maxUnavailabe' not allowed"},
		{[]string{"--set", "replicas=0"}, "/replicas"},
		{[]string{"--set", "namespaceMode=everywhere"}, "/namespaceMode"},
		{[]string{"--set", "image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{[]string{"--set-json", `imagePullSecrets=["regcred"]`}, "/imagePullSecrets/0"},
		{[]string{"--set-json", `nodeSelector={"pool":1}`}, "/nodeSelector/pool"},
	} {
		out, err := execOut(helm, append([]string{"template", "celld-operator", chart, "--kube-version", testedKube}, c.set...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("helm template %s: %v; want refused, naming %q:\n%.400s", strings.Join(c.set, " "), err, c.want, out)
		}
	}
}

// TestChartPodValues: the values a platform sets on every component it runs reach the operator's
// Pods, the chart's selector labels winning over podLabels; the PodDisruptionBudget and the
// NetworkPolicy come and go with their values.
func TestChartPodValues(t *testing.T) {
	objs := objects(t, helmTemplate(t,
		"--set-json", `tolerations=[{"key":"platform","operator":"Exists","effect":"NoSchedule"}]`,
		"--set-json", `nodeSelector={"pool":"system"}`,
		"--set-json", `affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["system"]}]}]}}}`,
		"--set-json", `imagePullSecrets=[{"name":"regcred"}]`,
		"--set", "priorityClassName=platform-critical",
		"--set-json", `podLabels={"team":"platform","app.kubernetes.io/name":"impostor"}`,
		"--set-json", `podAnnotations={"example.com/owner":"platform"}`,
		"--set", "podSecurityContext.fsGroup=65532",
		"--set", "securityContext.readOnlyRootFilesystem=true",
		"--set", "podDisruptionBudget.maxUnavailable=0",
		"--set", "networkPolicy.enabled=true",
		"--set-json", `networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`))
	dep := objs["Deployment/celld-system/celld-operator"]
	if dep == nil {
		t.Fatal("no Deployment rendered")
	}
	tmpl := dep["spec"].(map[string]any)["template"].(map[string]any)
	meta, pod := tmpl["metadata"].(map[string]any), tmpl["spec"].(map[string]any)
	labels := meta["labels"].(map[string]any)
	get := func(m map[string]any, path ...string) any {
		var v any = m
		for _, p := range path {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = mm[p]
		}
		return v
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"toleration", fmt.Sprint(pod["tolerations"]), "[map[effect:NoSchedule key:platform operator:Exists]]"},
		{"nodeSelector", fmt.Sprint(pod["nodeSelector"]), "map[pool:system]"},
		{"affinity replaces the default", fmt.Sprint(get(pod, "affinity", "podAntiAffinity")) + " " + fmt.Sprint(get(pod, "affinity", "nodeAffinity") != nil), "<nil> true"},
		{"pull secret", fmt.Sprint(pod["imagePullSecrets"]), "[map[name:regcred]]"},
		{"priority class", pod["priorityClassName"], "platform-critical"},
		{"pod label", labels["team"], "platform"},
		{"selector label kept", labels["app.kubernetes.io/name"], "celld-operator"},
		{"pod annotation", get(meta, "annotations", "example.com/owner"), "platform"},
		{"pod security context", get(pod, "securityContext", "fsGroup"), float64(65532)},
		{"pod security context defaults kept", get(pod, "securityContext", "runAsNonRoot"), true},
		{"PodDisruptionBudget", get(objs["PodDisruptionBudget/celld-system/celld-operator"], "spec", "maxUnavailable"), float64(0)},
		{"NetworkPolicy", fmt.Sprint(get(objs["NetworkPolicy/celld-system/celld-operator"], "spec", "ingress")),
			"[map[from:[map[namespaceSelector:map[matchLabels:map[kubernetes.io/metadata.name:monitoring]]]] ports:[map[port:metrics protocol:TCP]]]]"},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}

	defaults := objects(t, helmTemplate(t))
	if _, ok := defaults["NetworkPolicy/celld-system/celld-operator"]; ok {
		t.Errorf("a NetworkPolicy at the default values")
	}
	if get(defaults["Deployment/celld-system/celld-operator"], "spec", "template", "spec", "affinity", "podAntiAffinity") == nil {
		t.Errorf("no anti-affinity at the default values")
	}
	off := objects(t, helmTemplate(t, "--set", "podDisruptionBudget.enabled=false"))
	if _, ok := off["PodDisruptionBudget/celld-system/celld-operator"]; ok {
		t.Errorf("podDisruptionBudget disabled, yet a PodDisruptionBudget")
	}
}

// TestChartREADME: the chart's README is what helm-docs writes from values.yaml.
func TestChartREADME(t *testing.T) {
	want := run(t, ".", tool(t, "helm-docs"), "--chart-search-root", chart, "--sort-values-order", "file", "--dry-run", "--log-level", "warning")
	got, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) != strings.TrimSpace(want) {
		t.Errorf("%s/README.md is not what helm-docs writes from values.yaml: run hack/chart-sync.sh", chart)
	}
	if !strings.Contains(want, "| tolerations | list | `[]` |") {
		t.Errorf("helm-docs wrote no row for tolerations:\n%s", want)
	}
}
