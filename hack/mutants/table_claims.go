package main

// The two promises of the Guarantees table's row 4 about what the operator leaves alone: a fleet
// deleted with its CustomResourceDefinition (an uninstall) changes nothing but its finalizer, and
// a claim under a fleet's disk name that carries no fleet label, or another fleet's, holds the
// fleet and is never deleted.
func init() {
	Table = append(Table,
		Mutant{
			Name: "uninstall-stops-workload-first", File: "machine/plan.go",
			Original: "\tif v.Uninstalling {\n\t\tp.uninstalling()\n\t\treturn\n\t}\n" +
				"\tif (v.Workload.Exists && v.Workload.Replicas != 0) || (!v.Workload.Exists && orphans(v) > 0) {\n" +
				"\t\t// Members a StatefulSet left when it was deleted to be created again have no controller\n\t\t// to stop them: the workload is created again at no member, which adopts and stops them.\n" +
				"\t\tw := p.m.render(v, p.fx.disks.fsKept, 0, v.Workload.Settled, 0).Workload()\n\t\tp.add(Action{Kind: Apply, Key: applyKey(w, 0), Ref: kinds.RefOf(w), Object: w})\n\t}\n",
			Replacement: "\tif (v.Workload.Exists && v.Workload.Replicas != 0) || (!v.Workload.Exists && orphans(v) > 0) {\n" +
				"\t\t// Members a StatefulSet left when it was deleted to be created again have no controller\n\t\t// to stop them: the workload is created again at no member, which adopts and stops them.\n" +
				"\t\tw := p.m.render(v, p.fx.disks.fsKept, 0, v.Workload.Settled, 0).Workload()\n\t\tp.add(Action{Kind: Apply, Key: applyKey(w, 0), Ref: kinds.RefOf(w), Object: w})\n\t}\n" +
				"\tif v.Uninstalling {\n\t\tp.uninstalling()\n\t\treturn\n\t}\n",
			Mistake:   "the workload stopped first on every deletion, the uninstall's shortcut taken after it: the members are stopped as the fleet goes with its CRD",
			Threatens: "row 4: an uninstall changes nothing but the finalizer (no workload write, no member stopped)",
		},
		Mutant{
			Name: "uninstall-falls-through", File: "machine/plan.go",
			Original:    "\tif v.Uninstalling {\n\t\tp.uninstalling()\n\t\treturn\n\t}\n",
			Replacement: "\tif v.Uninstalling {\n\t\tp.uninstalling()\n\t}\n",
			Mistake:     "the early return forgotten: the uninstall's finalizer removal is followed by a deletion's steps (workload stopped, disks deleted once no member is left)",
			Threatens:   "row 4: an uninstall deletes no disk and changes nothing but the finalizer",
		},
		Mutant{
			Name: "uninstall-persistent-only", File: "machine/plan.go",
			Original:    "\tif v.Uninstalling {\n\t\tp.uninstalling()",
			Replacement: "\tif v.Uninstalling && f.Spec.Profile == v1alpha1.ProfilePersistentFleet {\n\t\tp.uninstalling()",
			Mistake:     "the uninstall taken to be about disks alone: a Bucket fleet deleted with its CRD goes through a deletion's steps, its members stopped",
			Threatens:   "row 4: an uninstall changes nothing but the finalizer, whatever the profile",
		},
		Mutant{
			Name: "audit-foreign-ignores-unlabelled", File: "machine/facts.go",
			Original:    "case d.FleetUID != v.Fleet.UID:",
			Replacement: "case d.FleetUID != \"\" && d.FleetUID != v.Fleet.UID:",
			Mistake:     "a claim with no fleet label taken for nobody's rather than a foreign one: the fleet is not held, and its StatefulSet adopts the claim",
			Threatens:   "row 4, Degraded ForeignDisks: a claim under the fleet's disk name with no fleet label holds the fleet",
		},
		Mutant{
			Name: "foreign-hold-once-workload-exists", File: "machine/facts.go",
			Original:    "case len(fx.foreign) > 0 && v.Fleet.Spec.Profile == v1alpha1.ProfilePersistentFleet:",
			Replacement: "case len(fx.foreign) > 0 && v.Workload.Exists && v.Fleet.Spec.Profile == v1alpha1.ProfilePersistentFleet:",
			Mistake:     "foreign disks held only once a workload runs: a new fleet's StatefulSet is created first, and adopts the claim",
			Threatens:   "row 4, Degraded ForeignDisks: the fleet is held before any workload exists",
		},
		Mutant{
			Name: "disk-delete-unlabelled-as-own", File: "machine/plan.go",
			Original:    "return d.FleetUID == f.UID && d.Ordinal >= 0",
			Replacement: "return (d.FleetUID == f.UID || d.FleetUID == \"\") && d.Ordinal >= 0",
			Mistake:     "a claim under the fleet's disk name that lost its labels taken for the fleet's own, and deleted with it",
			Threatens:   "row 4, clause 4: a claim with no fleet label is never deleted",
		},
	)
}
