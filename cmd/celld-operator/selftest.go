package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/deploy/crds"
	"github.com/celld/celld-operator/internal/cli"
)

// newSelftest is what `helm test` runs: it answers "is the installed operator working?" from the
// API server, as a user would check it.
func newSelftest() *cobra.Command {
	var kubeconfig, namespace string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "selftest",
		Short: "Check an installed operator: a replica leads, and the CelldFleet CRD is this release's",
		Long: `selftest checks, from the API server, that an installed operator works: a replica holds the
leader-election Lease and renews it, and the API server serves the CelldFleet CRD this binary was
built with (an upgrade applies the CRDs first). It reads only what the operator's ServiceAccount
may read, and retries until --timeout, then fails naming what it found. The Helm chart's test runs
it (helm test).`,
		Example: `  celld-operator selftest --namespace celld-system
  celld-operator selftest --kubeconfig ~/.kube/config --namespace celld-system`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if namespace == "" {
				namespace = os.Getenv("POD_NAMESPACE")
			}
			if namespace == "" {
				return cli.Usagef("--namespace: name the operator's namespace (or set POD_NAMESPACE)")
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			defer cancel()
			for _, check := range []struct {
				what string
				run  func(context.Context) error
			}{
				{"a replica leads", func(ctx context.Context) error { return leads(ctx, kube, namespace, time.Now) }},
				{"the CelldFleet CRD is this release's", func(ctx context.Context) error { return crdIsThisRelease(ctx, dyn) }},
			} {
				if err := retry(ctx, check.run); err != nil {
					return fmt.Errorf("%s: %w", check.what, err)
				}
				fmt.Fprintf(c.OutOrStdout(), "ok: %s\n", check.what)
			}
			return nil
		},
	}
	c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig (default: the Pod's service account)")
	c.Flags().StringVarP(&namespace, "namespace", "n", "", "the operator's namespace, where its Lease is (default $POD_NAMESPACE)")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the checks to pass")
	return c
}

// retry runs check until it passes or ctx ends, and returns its last error.
func retry(ctx context.Context, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Second):
		}
	}
}

// leads: the operator's Lease has a holder that renewed it within its duration.
func leads(ctx context.Context, kube kubernetes.Interface, namespace string, now func() time.Time) error {
	l, err := kube.CoordinationV1().Leases(namespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read the Lease %s/%s: %w (is the operator installed in %s?)", namespace, leaseName, err, namespace)
	}
	return leaseHeld(l, now())
}

func leaseHeld(l *coordinationv1.Lease, now time.Time) error {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" {
		return fmt.Errorf("the Lease %s/%s has no holder: no replica leads (kubectl -n %s get pods)", l.Namespace, l.Name, l.Namespace)
	}
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return fmt.Errorf("the Lease %s/%s, held by %s, was never renewed", l.Namespace, l.Name, *s.HolderIdentity)
	}
	if age := now.Sub(s.RenewTime.Time); age > time.Duration(*s.LeaseDurationSeconds)*time.Second {
		return fmt.Errorf("the Lease %s/%s, held by %s, was last renewed %s ago, beyond its %ds: its holder is gone or stuck",
			l.Namespace, l.Name, *s.HolderIdentity, age.Round(time.Second), *s.LeaseDurationSeconds)
	}
	return nil
}

// crdIsThisRelease: the CelldFleet CRD the API server serves has the versions and schemas this
// binary was built with (deploy/crds, embedded): an operator whose CRD was not upgraded with it
// would read fleets through an older schema. The operator's own ServiceAccount may read that CRD.
func crdIsThisRelease(ctx context.Context, dyn dynamic.Interface) error {
	got, err := dyn.Resource(crdResource).Get(ctx, "celldfleets.celld.io", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read the CRD celldfleets.celld.io: %w (are the release's CRDs installed?)", err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(crds.CelldFleet, &want); err != nil {
		return fmt.Errorf("the embedded CRD: %w", err)
	}
	return sameVersions(got.Object, want)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// sameVersions compares the served versions of two CRDs (names, served, storage and schemas),
// as JSON values, and names the first version that differs.
func sameVersions(installed, release map[string]any) error {
	versions := func(crd map[string]any) map[string]any {
		out := map[string]any{}
		list, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
		for _, v := range list {
			if m, ok := v.(map[string]any); ok {
				name, _ := m["name"].(string)
				out[name] = map[string]any{"served": m["served"], "storage": m["storage"], "schema": m["schema"]}
			}
		}
		return out
	}
	have, want := jsonValue(versions(installed)), jsonValue(versions(release))
	// Sorted, so that the message names every missing version and is the same on every run.
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	var missing []string
	for _, name := range names {
		if _, ok := have[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the installed CelldFleet CRD has no version %s: apply this release's CRDs (celld-operator-crds.yaml) before its operator", strings.Join(missing, ", "))
	}
	for _, name := range names {
		if !reflect.DeepEqual(have[name], want[name]) {
			return fmt.Errorf("the installed CelldFleet CRD's version %s is not this release's: apply this release's CRDs (celld-operator-crds.yaml) before its operator", name)
		}
	}
	return nil
}

// jsonValue is v as encoding/json decodes it, so that numbers compare alike whichever decoder
// (the API client's or YAML's) made them.
func jsonValue(v map[string]any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}
