package main

// One mistake of each class of bug that only the end-to-end suites used to see (issue 50): a
// transition rule and an admission policy, a bound held in two places, a failed read that decides
// something destructive, the fence after a lost lease, what the operator completes of what a user
// gives, drift the other way, and storage migration's answers and pages.
func init() {
	Table = append(Table,
		Mutant{
			Name: "crd-workload-may-be-removed", File: "deploy/crds/celld.io_celldfleets.yaml", Every: true,
			Original:    "rule: has(self.workload) == has(oldSelf.workload) && (",
			Replacement: "rule: (",
			Mistake:     "the workload rule compares the kind only where both versions name one: removing spec.workload passes, and the default swaps a StatefulSet for a Deployment",
			Threatens:   "spec.workload is immutable (a Bucket fleet's members never change workload kind)",
		},
		Mutant{
			Name: "policy-reservation-status-uncovered", File: "deploy/rbac/reservation_policy.yaml",
			Original:    `resources: ["celldreservations", "celldreservations/status"]`,
			Replacement: `resources: ["celldreservations"]`,
			Mistake:     "the reservation policy matches the resource and forgets its status subresource: anyone RBAC lets write status rewrites the capacity history",
			Threatens:   "reservations are written by the operator alone; clause 6's history is the operator's",
		},
		Mutant{
			Name: "readiness-default-on-update", File: "deploy/rbac/readiness_default.yaml",
			Original:    `operations: ["CREATE"]`,
			Replacement: `operations: ["CREATE", "UPDATE"]`,
			Mistake:     "the readiness default applied on every write: the first status write after the operator's upgrade gives every existing fleet a new probe",
			Threatens:   "an upgrade of the operator restarts no member",
		},
		Mutant{
			Name: "readiness-default-over-named", File: "deploy/rbac/readiness_default.yaml",
			Original:    `expression: "!has(object.spec.readiness)"`,
			Replacement: `expression: "!has(object.spec.readiness) || !has(object.spec.readiness.periodSeconds)"`,
			Mistake:     "the default written over a spec.readiness that names some fields: what a person set is replaced",
			Threatens:   "what a person names in the spec is theirs",
		},
		Mutant{
			Name: "bound-history-past-maxitems", File: "reservation/history.go",
			Original:    "const MaxHistory = 32",
			Replacement: "const MaxHistory = 100",
			Mistake:     "the history kept longer in the code, the CRD's maxItems (64) left as it was: every append past 64 is refused",
			Threatens:   "clause 6: every capacity decision is recorded, so scale-in windows start and hold",
		},
		Mutant{
			Name: "uninstall-read-error-dropped", File: "drivers/kube/controller.go",
			Original:    "if obs.Uninstalling, err = uninstalling(ctx, d.c.meta); err != nil {",
			Replacement: "if obs.Uninstalling, _ = uninstalling(ctx, d.c.meta); err != nil {",
			Mistake:     "the CRD read made best effort: a failed read counts as no uninstall, and a fleet deleted with its CRD has its disks deleted",
			Threatens:   "row 4: an uninstall deletes no disk; an error is an error, never a guess",
		},
		Mutant{
			Name: "lease-renewal-timed-on-answer", File: "drivers/kube/leadership.go",
			Original:    "\tsent := r.l.now()\n\terr := r.Interface.Update(ctx, ler)\n",
			Replacement: "\terr := r.Interface.Update(ctx, ler)\n\tsent := r.l.now()\n",
			Mistake:     "a renewal timed when its answer came back: the leader writes for as long past the renew deadline as the API server took to answer",
			Threatens:   "writes stop before a standby may take the Lease (the fence after leadership is lost)",
		},
		Mutant{
			Name: "spread-overwrites-expression-selector", File: "render/pod.go",
			Original:    "\t\tif c.LabelSelector == nil {\n",
			Replacement: "\t\tif c.LabelSelector == nil || len(c.LabelSelector.MatchLabels) == 0 {\n",
			Mistake:     "a selector of expressions alone taken for no selector: the user's is replaced with the fleet's",
			Threatens:   "spec.placement.topologySpreadConstraints: only a constraint left without a selector is completed",
		},
		Mutant{
			Name: "drift-ignores-longer-observed-list", File: "render/compare.go",
			Original:    "\t\tif !ok || len(ov) != len(dv) {\n",
			Replacement: "\t\tif !ok || len(ov) < len(dv) {\n",
			Mistake:     "a list compared entry by entry as far as the desired one goes: a rule, a container or a port added by hand is not drift",
			Threatens:   "a hand edit of what the operator sets is drift, and is repaired (NetworkPolicies allow peers and clients only)",
		},
		Mutant{
			Name: "disk-online-growth-restarts", File: "machine/disks.go",
			Original:    "\t\t\tif left := d.ResizePendingSince.Add(OnlineGrowGrace).Sub(v.Now); left > 0 {\n",
			Replacement: "\t\t\tif left := time.Duration(0); left > 0 {\n",
			Mistake:     "FileSystemResizePending taken alone as a call to restart: every member of a fleet whose disks the kubelet grows online is restarted",
			Threatens:   "a resize restarts no member unless its filesystem grows only when the member starts again",
		},
		Mutant{
			Name: "disk-node-resize-error-waits", File: "machine/disks.go",
			Original:    "\t\tcase d.NodeResizeFailed:\n",
			Replacement: "\t\tcase d.NodeResizeFailed && d.Resize == \"\":\n",
			Mistake:     "a kubelet's failed online growth not taken as the call to restart: a driver that grows only unmounted filesystems never grows them",
			Threatens:   "a filesystem that grows only when its member restarts is grown, through the rolling update",
		},
		Mutant{
			Name: "drift-policy-by-subset", File: "render/compare.go",
			Original:    "\tif _, policy := desired.(*networkingv1.NetworkPolicy); policy {\n",
			Replacement: "\tif _, policy := desired.(*networkingv1.NetworkPolicy); policy && false {\n",
			Mistake:     "a NetworkPolicy compared by the subset test: a namespaceSelector put beside the operator's podSelector, or an empty selector for a missing one, is not drift",
			Threatens:   "members accept traffic only from their peers and the allowed clients; a hand edit of a fleet's policy is repaired",
		},
		Mutant{
			Name: "migration-skips-invalid", File: "internal/storagemigration/migrate.go",
			Original:    "case apierrors.IsConflict(err) || apierrors.IsNotFound(err):",
			Replacement: "case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err):",
			Mistake:     "an object the API server refuses to rewrite (Invalid) skipped as one written meanwhile: the CRD records a version no longer stored while it still is",
			Threatens:   "migrate-storage records the stored versions only once every object is in the storage version",
		},
		Mutant{
			Name: "migration-continue-not-sent", File: "internal/storagemigration/migrate.go",
			Original:    `if opts.Continue = list.GetContinue(); opts.Continue == "" {`,
			Replacement: `if list.GetContinue() == "" {`,
			Mistake:     "the continue token checked but not sent back: the first page is listed again and again",
			Threatens:   "migrate-storage rewrites every object of every page",
		},
	)
}
