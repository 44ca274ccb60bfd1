package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/drivers/kube"
)

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Alert string `json:"alert"`
		Expr  string `json:"expr"`
	} `json:"rules"`
}

// ruleGroups reads the groups of the PrometheusRule, and its spec as a plain Prometheus rule file.
func ruleGroups(t *testing.T) ([]ruleGroup, []byte) {
	t.Helper()
	raw, err := os.ReadFile("monitoring/prometheus_rule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := json.Unmarshal(pr.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	file, err := yaml.JSONToYAML(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return spec.Groups, file
}

// TestAlertRules runs promtool test rules on the PrometheusRule's groups: the unit tests of
// monitoring/tests/rules_test.yaml, and promtool's own checks of every expression.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool")
	_, rules := ruleGroups(t)
	dir := t.TempDir()
	tests, err := os.ReadFile("monitoring/tests/rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"rules.yaml": rules, "rules_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, dir, promtool, "check", "rules", "rules.yaml")
	out := run(t, dir, promtool, "test", "rules", "rules_test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules did not succeed:\n%s", out)
	}
}

// TestEveryAlertFiresAndStaysSilent: the rule tests hold, for every alert, a case where it fires
// and one where it stays silent, and name no alert the rules do not have.
func TestEveryAlertFiresAndStaysSilent(t *testing.T) {
	groups, _ := ruleGroups(t)
	raw, err := os.ReadFile("monitoring/tests/rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string            `json:"alertname"`
				ExpAlerts []json.RawMessage `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if !fires[r.Alert] {
				t.Errorf("alert %s has no case where it fires", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("alert %s has no case where it stays silent", r.Alert)
			}
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("the rule tests expect alert %s, which no rule defines", name)
		}
	}
	if len(alerts) < 8 {
		t.Errorf("%d alerts, want at least the 8 of the kit", len(alerts))
	}
}

var (
	promqlString  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatcher = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)
	promqlLabels  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlToken   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?|[0-9][a-zA-Z0-9_.]*`)
	promqlWords   = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan", "Inf", "NaN"}
)

// metricNames are the metric names a PromQL expression selects: what is left once strings,
// label matchers, ranges and label lists are taken out, apart from function names, keywords and
// numbers.
func metricNames(expr string) []string {
	s := promqlString.ReplaceAllString(expr, `""`)
	for prev := ""; prev != s; {
		prev, s = s, promqlMatcher.ReplaceAllString(s, " ")
	}
	s = promqlLabels.ReplaceAllString(s, " ")
	var names []string
	for _, m := range promqlToken.FindAllStringSubmatch(s, -1) {
		tok := m[0]
		switch {
		case m[1] != "", tok[0] >= '0' && tok[0] <= '9', slices.Contains(promqlWords, tok):
			continue
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	sort.Strings(names)
	return names
}

func TestMetricNames(t *testing.T) {
	cases := map[string]string{
		`sum by (namespace, fleet) (rate(foo_total{a="b", c=~"x|y"}[5m])) > 0`:                         "foo_total",
		`max(a_metric{x="{not}"}) unless on (ns) (b_metric == 1) and ignoring(z) c:recorded offset 1h`: "a_metric b_metric c:recorded",
		`histogram_quantile(0.99, sum by (le) (rate(h_bucket[$__rate_interval])))`:                     "h_bucket",
		`absent(up) or vector(0)`: "up",
	}
	for expr, want := range cases {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// exported tells whether name is a series the operator exports: a family, or a histogram's
// _bucket, _sum or _count.
func exported(families []string, name string) bool {
	if slices.Contains(families, name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(families, base) {
			return true
		}
	}
	return false
}

// TestMonitoringNamesExportedMetrics fails when an alert, or a panel of the dashboard, names a
// metric the operator does not export: a renamed metric would leave an alert silent forever.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	families := kube.NewMetrics().Families()
	exprs := map[string]string{}
	groups, _ := ruleGroups(t)
	for _, g := range groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	raw, err := os.ReadFile("monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs["panel "+p.Title+" "+q.RefID] = q.Expr
		}
	}
	for _, v := range dash.Templating.List {
		if d, ok := strings.CutPrefix(v.Definition, "label_values("); ok {
			exprs["variable "+v.Name] = strings.SplitN(d, ",", 2)[0]
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("%d queries read, want the kit's alerts and panels", len(exprs))
	}
	for where, expr := range exprs {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
		for _, n := range names {
			if !exported(families, n) {
				t.Errorf("%s names %s, which the operator does not export (%q)", where, n, expr)
			}
		}
	}
}
