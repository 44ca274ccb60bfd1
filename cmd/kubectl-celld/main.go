// Command kubectl-celld is a kubectl plugin for celld fleets: on the PATH, `kubectl celld status
// FLEET` shows what the operator and the cluster say about a fleet in one screen, and
// `kubectl celld history FLEET` the capacity decisions its reservation keeps.
//
// Its reading commands only read: everything they show is in the API server, where kubectl get and
// describe find it too; they save the reader the joins (fleet, Pods, nodes, claims, reservation).
// pause, resume and restart set one annotation of a fleet; migrate-storage rewrites stored objects
// as they are, after an upgrade that moved the CRDs' storage version.
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/storagemigration"
)

func main() {
	if err := newRoot(os.Stdout, os.Stderr, time.Now).Execute(); err != nil {
		os.Exit(exitCode(err))
	}
}

// usageError is a command line the plugin cannot run: exit status 2, as kubectl's.
type usageError struct{ error }

func exitCode(err error) int {
	if _, ok := err.(usageError); ok {
		return 2
	}
	return 1
}

func newRoot(out, errOut io.Writer, now func() time.Time) *cobra.Command {
	// kubectl's own connection flags (--kubeconfig, --context, -n, --server...), read the way
	// kubectl reads them: KUBECONFIG, then ~/.kube/config.
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	flags := clientcmd.NewInteractiveDeferredLoadingClientConfig(rules, overrides, os.Stdin)
	root := &cobra.Command{
		Use:           "kubectl-celld",
		Short:         "Inspect celld fleets: status and capacity history",
		SilenceUsage:  true,
		SilenceErrors: false,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl celld"},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(overrides, root.PersistentFlags(), clientcmd.RecommendedConfigOverrideFlags(""))
	oneFleet := func(c *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("%s takes one fleet name, got %d arguments: see %s --help", c.CommandPath(), len(args), c.CommandPath())}
		}
		return nil
	}
	// format is -o of the reading commands, checked before anything is read.
	var format outputFormat
	readsOne := func(c *cobra.Command, args []string) error {
		if err := oneFleet(c, args); err != nil {
			return err
		}
		o, _ := c.Flags().GetString("output")
		f, err := parseOutput(o)
		format = f
		return err
	}
	withOutput := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringP("output", "o", "", "json or yaml: the same facts as data, for scripts (default: a table)")
		return c
	}
	root.AddCommand(withOutput(&cobra.Command{
		Use:   "status FLEET",
		Short: "The fleet's state, conditions, members (Pod, node, zone, ready, revision, disk, age), reservation and latest capacity decisions",
		Example: `  kubectl celld status alpha -n team
  kubectl celld status alpha -n team --history 10
  kubectl celld status alpha -n team -o json | jq '.members[] | select(.ready | not) | .pod'`,
		Args: readsOne,
		RunE: func(c *cobra.Command, args []string) error {
			cl, ns, err := clientsFor(flags)
			if err != nil {
				return err
			}
			n, _ := c.Flags().GetInt("history")
			r, err := read(c.Context(), cl, ns, args[0])
			if err != nil {
				return err
			}
			if format != "" {
				return write(c.OutOrStdout(), format, statusDocOf(r))
			}
			printStatus(c.OutOrStdout(), r, now(), n)
			return nil
		},
	}))
	root.Commands()[0].Flags().Int("history", 5, "how many of the latest capacity decisions to show (the table only: json and yaml carry the reservation's whole history)")
	root.AddCommand(withOutput(&cobra.Command{
		Use:   "history FLEET",
		Short: "Every capacity decision the fleet's reservation keeps, oldest first",
		Example: `  kubectl celld history alpha -n team
  kubectl celld history alpha -n team -o yaml`,
		Args: readsOne,
		RunE: func(c *cobra.Command, args []string) error {
			cl, ns, err := clientsFor(flags)
			if err != nil {
				return err
			}
			r, err := read(c.Context(), cl, ns, args[0])
			if err != nil {
				return err
			}
			if format != "" {
				return write(c.OutOrStdout(), format, historyDocOf(r))
			}
			printHistory(c.OutOrStdout(), r, now(), -1)
			return nil
		},
	}))
	for _, c := range []struct {
		use, short, verb string
		value            *string
	}{
		{"pause FLEET", "Stop the operator from changing the fleet: it writes only the fleet's status until resumed", "paused", ptr("true")},
		{"resume FLEET", "Let the operator change the fleet again: it decides on the fleet as it is now, in one decision", "resumed", nil},
	} {
		c := c
		root.AddCommand(&cobra.Command{
			Use:   c.use,
			Short: c.short,
			Args:  oneFleet,
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, ns, err := clientsFor(flags)
				if err != nil {
					return err
				}
				if err := annotate(cmd.Context(), cl, ns, args[0], v1alpha1.AnnotationPaused, c.value); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "celldfleet %s/%s %s\n", ns, args[0], c.verb)
				return nil
			},
		})
	}
	root.AddCommand(&cobra.Command{
		Use:   "restart FLEET",
		Short: "Replace every member once, one at a time, each after the previous is ready (a rolling restart by the workload's controller)",
		Args:  oneFleet,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := clientsFor(flags)
			if err != nil {
				return err
			}
			at := now().UTC().Format(time.RFC3339)
			if err := annotate(cmd.Context(), cl, ns, args[0], v1alpha1.AnnotationRestartedAt, &at); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "celldfleet %s/%s restart requested at %s\n", ns, args[0], at)
			return nil
		},
	})
	for _, c := range []struct {
		use, short, long, verb string
		hibernate              bool
	}{
		{"hibernate FLEET", "Stop every member of the fleet at once and keep its disks, reservation, bucket and size (spec.hibernate true)",
			`hibernate sets spec.hibernate to true. The operator stops every member at once (it deletes the
workload; the garbage collector stops the Pods) and keeps the fleet's disks, reservation, bucket,
Services, policies and spec.members. While the fleet sleeps, spec.members cannot change: no HPA or
recommendation moves it. kubectl celld wake starts it again.`, "hibernating", true},
		{"wake FLEET", "Start a hibernated fleet again at spec.members, on the disks it kept (spec.hibernate false)",
			`wake sets spec.hibernate to false. The operator creates the workload again at spec.members over the
claims the fleet kept; the fleet is Waking until every member is ready, then Steady. To wake at
another size, patch spec.hibernate and spec.members in one write.`, "waking", false},
	} {
		c := c
		root.AddCommand(&cobra.Command{
			Use:   c.use,
			Short: c.short,
			Long:  c.long,
			Example: `  kubectl celld hibernate alpha -n team
  kubectl celld status alpha -n team      # State: Hibernated
  kubectl celld wake alpha -n team`,
			Args: oneFleet,
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, ns, err := clientsFor(flags)
				if err != nil {
					return err
				}
				if err := setHibernate(cmd.Context(), cl, ns, args[0], c.hibernate); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "celldfleet %s/%s %s (kubectl celld status %s shows how far)\n", ns, args[0], c.verb, args[0])
				return nil
			},
		})
	}
	rollout := &cobra.Command{
		Use:   "rollout",
		Short: "Staged rollouts (spec.rollout): continue one held at its canary members",
		Args:  cobra.NoArgs,
	}
	approve := &cobra.Command{
		Use:   "approve FLEET",
		Short: "Let a held rollout continue: the members not yet updated follow one at a time; a later change holds again",
		Long: `approve writes the annotation celld.io/rollout-approved with the revision the fleet's status shows
held (status.rollout.revision). It approves that revision only: a change of the template after it is
a new revision and holds at its canary members again. With --revision, it approves only if that is
the revision held, so what you checked is what goes out.`,
		Example: `  kubectl celld status alpha -n team     # Rollout: HELD: revision alpha-7d9f... on 1 of 3 members
  kubectl celld rollout approve alpha -n team`,
		Args: oneFleet,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ns, err := clientsFor(flags)
			if err != nil {
				return err
			}
			want, _ := cmd.Flags().GetString("revision")
			r, err := read(cmd.Context(), cl, ns, args[0])
			if err != nil {
				return err
			}
			rev, err := heldRevision(r.fleet, want)
			if err != nil {
				return err
			}
			if err := annotate(cmd.Context(), cl, ns, args[0], v1alpha1.AnnotationRolloutApproved, &rev); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "celldfleet %s/%s rollout of revision %s approved\n", ns, args[0], rev)
			return nil
		},
	}
	approve.Flags().String("revision", "", "approve only if this is the revision held (status.rollout.revision)")
	rollout.AddCommand(approve)
	root.AddCommand(rollout)
	root.AddCommand(&cobra.Command{
		Use:   "migrate-storage",
		Short: "After an upgrade that moved the CRDs' storage version: rewrite every stored fleet, reservation and bucket policy in it, then record that no other version is stored",
		Long: `migrate-storage rewrites every CelldFleet, CelldReservation and CelldBucketPolicy as it is, so that
the API server stores each in the CRD's storage version, then sets each CRD's status.storedVersions
to that version alone. Run it once after an upgrade whose CHANGELOG entry asks for it, with rights
to update those objects in every namespace and the CRDs' status (a cluster administrator's). It
changes nothing of any object, so it starts no member and moves no fleet; running it again finds
nothing to do.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := flags.ClientConfig()
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			results, err := storagemigration.Migrate(cmd.Context(), dyn, storagemigration.CRDs)
			for _, r := range results {
				fmt.Fprintln(cmd.OutOrStdout(), r)
			}
			return err
		},
	})
	return root
}

func ptr(s string) *string { return &s }

// heldRevision is the revision a fleet's status shows held, which want (when given) must be.
func heldRevision(f *v1alpha1.CelldFleet, want string) (string, error) {
	r := f.Status.Rollout
	switch {
	case f.Spec.Rollout == nil:
		return "", fmt.Errorf("celldfleet %s/%s stages no rollout (spec.rollout is not set): its changes roll through every member on their own", f.Namespace, f.Name)
	case r == nil || !r.Held:
		return "", fmt.Errorf("celldfleet %s/%s has no rollout held for approval (kubectl celld status %s shows where its rollout stands)", f.Namespace, f.Name, f.Name)
	case want != "" && want != r.Revision:
		return "", fmt.Errorf("celldfleet %s/%s holds revision %s, not %s: check it, then approve it by that name", f.Namespace, f.Name, r.Revision, want)
	}
	return r.Revision, nil
}
