package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
)

// TestRunFlagsKeepTheirNamesAndDefaults: run's flags are an interface the manifests, the Helm
// chart, the end-to-end tests and the benchmark pass; a name or a default changes only on purpose.
func TestRunFlagsKeepTheirNamesAndDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	want := map[string]string{
		"kubeconfig": "", "namespace": "", "workers": "32", "kube-api-qps": "100", "kube-api-burst": "200", "moving-client-limit": "auto",
		"metrics-bind-address": ":8443", "metrics-secure": "true", "metrics-cert-dir": "",
		"health-probe-bind-address": ":8081", "pprof": "false", "leader-elect": "false",
		"leader-election-namespace": "celld-system", "log-format": "json", "log-level": "info",
		"resync-period": "10m0s", "capacity-interval": "30s", "leader-election-lease-duration": "15s",
		"leader-election-renew-deadline": "10s", "leader-election-retry-period": "2s",
	}
	if addFaultFlags != nil {
		want["api-fault-rate"], want["api-fault-seed"], want["api-stall-writes"] = "0", "1", ""
	}
	got := map[string]string{}
	newRun().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			got[f.Name] = f.DefValue
			if f.Shorthand != "" {
				t.Errorf("--%s has the shorthand -%s: run's flags have none", f.Name, f.Shorthand)
			}
		}
	})
	for name, def := range want {
		if g, ok := got[name]; !ok || g != def {
			t.Errorf("--%s: default %q (defined: %t); want %q", name, g, ok, def)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("--%s is new: add it to this test", name)
		}
	}
}

// TestShippedArgsParse: every flag the manifests and the Helm chart pass to run is one run has,
// spelled with two dashes.
func TestShippedArgsParse(t *testing.T) {
	flags := newRun().Flags()
	arg := regexp.MustCompile(`(?m)^\s*- (-{1,2})([a-z][a-z0-9-]*)`)
	for _, file := range []string{"../../deploy/operator/deployment.yaml", "../../deploy/helm/celld-operator/templates/deployment.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range arg.FindAllStringSubmatch(string(data), -1) {
			n++
			if m[1] != "--" || flags.Lookup(m[2]) == nil {
				t.Errorf("%s passes %s%s: run has no such flag", file, m[1], m[2])
			}
		}
		if n < 3 || !strings.Contains(string(data), "- run") {
			t.Errorf("%s: found %d flags of run; the pattern is broken", file, n)
		}
	}
}

// --moving-client-limit auto drops the limit of the client that moves fleets only on an API
// server that says it runs priority and fairness; always keeps it, and so does a server whose
// answer is unknown.
func TestMovingClientLimitFollowsTheServer(t *testing.T) {
	apf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, "uid")
	}))
	defer apf.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer plain.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	cases := []struct {
		host, limit string
		unlimited   bool
	}{
		{apf.URL, "auto", true},
		{apf.URL, "always", false},
		{plain.URL, "auto", false},
		{failing.URL, "auto", false},
	}
	for _, c := range cases {
		got := clientLimits(&rest.Config{Host: c.host}, runFlags{movingLimit: c.limit, qps: 100}, zerolog.Nop())
		if got.MovingUnlimited != c.unlimited {
			t.Errorf("%s with --moving-client-limit %s: unlimited %t, want %t", c.host, c.limit, got.MovingUnlimited, c.unlimited)
		}
	}
}

// --namespace takes a list; a value that is not a list of namespace names is refused before
// anything connects, naming the flag.
func TestNamespaceListChecked(t *testing.T) {
	for value, ok := range map[string]bool{"": true, "team-a": true, "team-a,team-b": true, "team-a,": false, "Team-A": false} {
		var flags runFlags
		addRunFlags(pflag.NewFlagSet("x", pflag.ContinueOnError), &flags)
		flags.namespace = value
		err := checkRunFlags(flags)
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "--namespace")) {
			t.Errorf("--namespace %q: %v, want accepted %t", value, err, ok)
		}
	}
}
