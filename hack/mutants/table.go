package main

// Mutant is one realistic mistake: Original, which must occur exactly once in File, becomes
// Replacement.
type Mutant struct {
	Name string
	// File is relative to the module root.
	File        string
	Original    string
	Replacement string
	// Mistake is the slip a person could make that the rewrite models.
	Mistake string
	// Threatens names the SPEC clause, lifecycle guard or rule the mistake breaks.
	Threatens string
}

// Table is the list of mutants `make mutants` runs. Keep each one a mistake someone could make
// and review past; never weaken one to raise the score: write the test that kills it.
var Table = []Mutant{
	// The lifecycle table's guards.
	{
		Name: "guard-settled-forgets-ready", File: "machine/graph.go",
		Original:    "return args[0].(*facts).settled()",
		Replacement: "return args[0].(*facts).rolledOt",
		Mistake:     "a rollout counted as done while a member is still not ready",
		Threatens:   "guard previousChangeRolledOutAndAllReady; clause 1",
	},
	{
		Name: "guard-scalein-skips-policy", File: "machine/graph.go",
		Original:    "return fx.plan.Next < fx.current",
		Replacement: "return fx.target.Members < fx.current",
		Mistake:     "scale-in allowed by the target alone, not by the step policy's answer",
		Threatens:   "guard scaleInAllowedByPolicy; clauses 1, 6",
	},
	{
		Name: "guard-heal-forgets-others", File: "machine/graph.go",
		Original:    "return fx.candidate != nil && fx.othersReady",
		Replacement: "return fx.candidate != nil",
		Mistake:     "a lost member is replaced without checking the other members",
		Threatens:   "guard onlyThatMemberNotReady; clauses 1, 3 (heal precondition: others ready)",
	},
	// Heal preconditions and the decision to heal.
	{
		// (lostCount == 1 -> >= 1 was tried first: it is equivalent, since a lost member is never
		// a ready one, so the check of the others already refuses it.)
		Name: "heal-ignores-missing-members", File: "machine/facts.go",
		Original:    "if !present[ord] && ord < m.Ordinal {",
		Replacement: "if !present[ord] && ord > m.Ordinal {",
		Mistake:     "the ordinal comparison inverted: a member missing below the one replaced is not missed",
		Threatens:   "clauses 1, 3: heal only while every other member is ready (one at a time)",
	},
	{
		Name: "heal-others-ready-by-flag", File: "machine/facts.go",
		Original:    "if m := &v.Members[i]; m != c.member && !memberReady(v, m) {",
		Replacement: "if m := &v.Members[i]; m != c.member && !m.Ready {",
		Mistake:     "the others' readiness read from the Pod's flag, not from a member that is up on a healthy node",
		Threatens:   "clause 1/3: heal only while every other member is ready",
	},
	{
		Name: "heal-block-checks-lost-only", File: "machine/plan.go",
		Original:    "if !p.fx.othersReady {\n\t\tp.block(",
		Replacement: "if p.fx.lostCount > 1 {\n\t\tp.block(",
		Mistake:     "the heal refuses only when another member is lost, not when one is merely not ready",
		Threatens:   "clause 3: heal preconditions (others ready)",
	},
	{
		Name: "heal-no-uid-precondition", File: "machine/plan.go",
		Original:    "UID: m.UID, ResourceVersion: m.ResourceVersion, Force: c.force",
		Replacement: "ResourceVersion: m.ResourceVersion, Force: c.force",
		Mistake:     "the Pod deleted by name, without its UID",
		Threatens:   "clause 3: UID precondition",
	},
	{
		Name: "heal-node-unhealthy-no-grace", File: "machine/facts.go",
		Original:    "if left := since.Add(grace).Sub(v.Now); left > 0 {",
		Replacement: "if left := since.Sub(v.Now); left > 0 {",
		Mistake:     "an unhealthy node's members replaced at once, without the grace period",
		Threatens:   "clause 3: only a member that cannot come back (grace period)",
	},
	{
		Name: "heal-volume-no-grace", File: "machine/facts.go",
		Original:    "\t\t\tif left := m.NotReadySince.Add(grace).Sub(v.Now); left > 0 {\n\t\t\t\treturn nil, left\n\t\t\t}\n\t\t\treturn &lost{member: m, reason: HealVolumeLost}, 0",
		Replacement: "\t\t\treturn &lost{member: m, reason: HealVolumeLost}, 0",
		Mistake:     "a claim missing from a lagging cache counts as a lost volume at once",
		Threatens:   "clause 3: only a member that cannot come back",
	},
	// Fence before force.
	{
		Name: "force-unfenced-notready-node", File: "machine/facts.go",
		Original:    "\t\t\tfx.unfenced = append(fx.unfenced, unfenced{member: m, node: m.NodeName, since: since})\n\t\t\treturn nil, 0",
		Replacement: "\t\t\treturn &lost{member: m, reason: HealNodeUnreachable, force: true}, 0",
		Mistake:     "a member on a node NotReady past the grace period force-deleted though nobody fenced the node",
		Threatens:   "clause 3: force only when the node is gone or fenced (two copies of one member never run)",
	},
	{
		Name: "fenced-by-unreachable-taint", File: "events/view.go",
		Original:    "if t.Key == corev1.TaintNodeOutOfService {\n\t\t\tnv.Fenced = true",
		Replacement: "if t.Key == corev1.TaintNodeOutOfService || t.Key == corev1.TaintNodeUnreachable {\n\t\t\tnv.Fenced = true",
		Mistake:     "the node controller's unreachable taint read as a person's out-of-service fence",
		Threatens:   "clause 3: force only when the node is gone or fenced",
	},
	{
		Name: "premise-unfenced-node-passes", File: "machine/premise.go",
		Original:    "if p.NodeFenced && !h.Fenced {",
		Replacement: "if p.NodeFenced && !h.Fenced && h.Ready {",
		Mistake:     "a fence lifted since the decision passes while the node is still NotReady",
		Threatens:   "premise of a forced heal: the node still fenced; clause 3",
	},
	{
		Name: "heal-terminating-on-healthy-node", File: "machine/facts.go",
		Original:    "if m.Terminating || m.Ready {\n\t\treturn nil, 0",
		Replacement: "if m.Ready {\n\t\treturn nil, 0",
		Mistake:     "a member terminating on a healthy node (its kubelet finishes it) treated as stuck",
		Threatens:   "clause 3: only a member that cannot come back",
	},
	{
		Name: "heal-broken-rollout-current-template", File: "machine/facts.go",
		Original:    "m.Revision != \"\" && m.Revision != w.UpdateRevision {",
		Replacement: "m.Revision != \"\" && m.Revision == w.UpdateRevision {",
		Mistake:     "the revision test inverted: a member not ready on the current template is replaced",
		Threatens:   "clause 3: a new Pod from the same template cannot come back either (MemberStuck, no heal)",
	},
	{
		Name: "heal-nodes-unsynced-are-gone", File: "machine/facts.go",
		Original:    "if name == \"\" || !v.NodesSynced {\n\t\treturn true, false, time.Time{}",
		Replacement: "if name == \"\" {\n\t\treturn true, false, time.Time{}",
		Mistake:     "a node missing from a cache that has not synced yet counts as gone",
		Threatens:   "clauses 3, 11: an operator restart force-deletes members",
	},
	{
		Name: "ready-counts-terminating", File: "machine/facts.go",
		Original:    "if !m.Ready || m.Terminating {\n\t\treturn false",
		Replacement: "if !m.Ready {\n\t\treturn false",
		Mistake:     "a terminating Pod still counts as a ready member",
		Threatens:   "clause 1: never scale in or heal while another member is not ready",
	},
	{
		Name: "ready-count-from-flag", File: "machine/facts.go",
		Original:    "if memberReady(v, m) {\n\t\t\tfx.ready++",
		Replacement: "if m.Ready {\n\t\t\tfx.ready++",
		Mistake:     "status counts as ready a member on a NotReady node",
		Threatens:   "status derivation (members.ready)",
	},
	// Rolled out.
	{
		Name: "rollout-forgets-observed-generation", File: "machine/facts.go",
		Original:    "fx.rolledOt = w.Exists && w.ObservedGeneration >= w.Generation && w.StatusReplicas == w.Replicas &&",
		Replacement: "fx.rolledOt = w.Exists && w.StatusReplicas == w.Replicas &&",
		Mistake:     "a workload status the controller has not updated for the new spec read as rolled out",
		Threatens:   "clause 1: the previous change has rolled out",
	},
	{
		Name: "rollout-forgets-ready-replicas", File: "machine/facts.go",
		Original:    "w.UpdatedReplicas == w.Replicas && w.ReadyReplicas == w.Replicas && fx.running == w.Replicas &&",
		Replacement: "w.UpdatedReplicas == w.Replicas && fx.running == w.Replicas &&",
		Mistake:     "rolled out without every replica ready",
		Threatens:   "clause 1; guard previousChangeRolledOutAndAllReady",
	},
	// The step policy and the history anchor.
	{
		Name: "policy-shrinks-to-target", File: "capacity/policy.go",
		Original:    "p.Next = f.Current - 1",
		Replacement: "p.Next = f.Target.Members",
		Mistake:     "scale-in goes to the target in one step, like growth",
		Threatens:   "clause 1: one member at a time",
	},
	{
		Name: "policy-grows-by-one", File: "capacity/policy.go",
		Original:    "p.Next = f.Target.Members\n\t\tp.Records = append(p.Records, decision(f, v1alpha1.DecisionGrow, f.Current, f.Target.Members))",
		Replacement: "p.Next = f.Current + 1\n\t\tp.Records = append(p.Records, decision(f, v1alpha1.DecisionGrow, f.Current, f.Target.Members))",
		Mistake:     "growth stepped one member at a time, like scale-in",
		Threatens:   "clause 2: growth reaches the target in one step",
	},
	{
		Name: "policy-no-window", File: "capacity/policy.go",
		Original:    "if ready := anchor.Time.Add(f.Window); f.Now.Before(ready) {",
		Replacement: "if ready := anchor.Time.Time; f.Now.Before(ready) {",
		Mistake:     "the stabilization window forgotten",
		Threatens:   "step policy: stabilization window; clause 6",
	},
	{
		Name: "policy-no-settled-check", File: "capacity/policy.go",
		Original:    "if !f.Settled {",
		Replacement: "if f.Now.IsZero() {",
		Mistake:     "the policy shrinks without the previous change rolled out",
		Threatens:   "clause 1; step policy: one member at a time",
	},
	{
		Name: "anchor-deeper-request-reuses-window", File: "capacity/policy.go",
		Original:    "return d, target >= d.To",
		Replacement: "return d, target <= d.To",
		Mistake:     "a request to remove more members reuses the window of an earlier, smaller one",
		Threatens:   "history anchor; clause 6",
	},
	{
		Name: "anchor-grow-does-not-end-request", File: "capacity/policy.go",
		Original:    "\t\tdefault:\n\t\t\treturn v1alpha1.CapacityDecision{}, false\n\t\t}\n\t}\n\treturn v1alpha1.CapacityDecision{}, false",
		Replacement: "\t\tdefault:\n\t\t\tcontinue\n\t\t}\n\t}\n\treturn v1alpha1.CapacityDecision{}, false",
		Mistake:     "a Grow no longer ends the scale-in request before it",
		Threatens:   "history anchor; clause 6",
	},
	{
		Name: "history-trim-drops-anchor", File: "capacity/history.go",
		Original:    "if anchor != 0 {",
		Replacement: "if anchor != 0 || len(h) > 0 {",
		Mistake:     "trimming the history drops the oldest entry even when it anchors the standing request",
		Threatens:   "clause 6: a trimmed history is never less conservative",
	},
	{
		Name: "recommend-acts-in-recommend-mode", File: "capacity/policy.go",
		Original:    "if spec.Capacity.Mode == v1alpha1.CapacityAuto {\n\t\tt.Members, t.Source = rec, v1alpha1.SourceRecommendation",
		Replacement: "if spec.Capacity.Mode != v1alpha1.CapacityManual {\n\t\tt.Members, t.Source = rec, v1alpha1.SourceRecommendation",
		Mistake:     "Recommend mode acts on its recommendation",
		Threatens:   "clause 7: recommendations take the request path only in Auto",
	},
	{
		Name: "recommend-ignores-max", File: "capacity/policy.go",
		Original:    "if c.MaxMembers != nil {\n\t\thi = *c.MaxMembers",
		Replacement: "if c.MaxMembers != nil && n <= *c.MaxMembers {\n\t\thi = *c.MaxMembers",
		Mistake:     "maxMembers applied only to a recommendation already within it",
		Threatens:   "clause 7: one function and one policy bound every target",
	},
	{
		Name: "grow-needs-two", File: "machine/fleet.go",
		Original:    "case fx.hold == \"\" && fx.plan.Next > fx.current:",
		Replacement: "case fx.hold == \"\" && fx.plan.Next > fx.current+1:",
		Mistake:     "off by one: growth by a single member never fires",
		Threatens:   "clauses 2, 10",
	},
	// Disks: only in Deleting, only PersistentFleet, only the fleet's own, only once no member.
	{
		Name: "disk-delete-any-uid", File: "machine/plan.go",
		Original:    "return d.FleetUID == f.UID && d.Ordinal >= 0 && d.Name == events.ClaimName(f.Name, d.Ordinal)",
		Replacement: "return d.Ordinal >= 0 && d.Name == events.ClaimName(f.Name, d.Ordinal)",
		Mistake:     "disks selected by the fleet's name, not its UID",
		Threatens:   "clause 4: only the fleet's own (fleet UID filter)",
	},
	{
		// (Dropping ownDisk's name comparison was tried first: it is equivalent, since Normalize
		// gives a disk an ordinal only under the exact name ClaimName makes.)
		Name: "claim-ordinal-not-canonical", File: "events/names.go",
		Original:    "if err != nil || n < 0 || strconv.Itoa(n) != rest[i+1:] {\n\t\treturn \"\", -1, false",
		Replacement: "if err != nil || n < 0 {\n\t\treturn \"\", -1, false",
		Mistake:     "a claim named data-a-08 (made by hand) read as member 8's",
		Threatens:   "disk filter: exact name, ordinal vs size (status.disks); clause 4: only the claims the StatefulSet made",
	},
	{
		Name: "disk-delete-bucket-profile", File: "machine/plan.go",
		Original:    "if f.Spec.Profile == v1alpha1.ProfilePersistentFleet {\n\t\town := 0",
		Replacement: "if f.Spec.Profile != \"\" {\n\t\town := 0",
		Mistake:     "the profile check dropped from the disk deletion",
		Threatens:   "clause 4: only for PersistentFleet",
	},
	{
		Name: "disk-delete-with-a-member-left", File: "machine/plan.go",
		Original:    "if n := len(v.Members); n > 0 {",
		Replacement: "if n := len(v.Members); n > 1 {",
		Mistake:     "off by one: disks deleted while the last member Pod still exists",
		Threatens:   "clause 4: only once no member Pod exists",
	},
	{
		Name: "disk-delete-terminating-again", File: "machine/plan.go",
		Original:    "if d.Terminating {\n\t\t\t\tcontinue\n\t\t\t}",
		Replacement: "if d.Lost {\n\t\t\t\tcontinue\n\t\t\t}",
		Mistake:     "a disk already terminating is deleted again every pass",
		Threatens:   "clause 8: no repeated mutating action (disk filter: terminating)",
	},
	{
		Name: "audit-unused-off-by-one", File: "machine/facts.go",
		Original:    "case d.Ordinal >= 0 && d.Ordinal >= int(fx.current) && !d.Terminating:",
		Replacement: "case d.Ordinal >= 0 && d.Ordinal > int(fx.current) && !d.Terminating:",
		Mistake:     "off by one: the disk of the first ordinal past the size is not reported unused",
		Threatens:   "disk filter: ordinal vs size (status.disks)",
	},
	{
		Name: "audit-unused-includes-terminating", File: "machine/facts.go",
		Original:    "d.Ordinal >= int(fx.current) && !d.Terminating:",
		Replacement: "d.Ordinal >= int(fx.current):",
		Mistake:     "a disk already being deleted reported as unused",
		Threatens:   "disk filter: terminating (status.disks)",
	},
	{
		Name: "audit-foreign-by-empty-uid", File: "machine/facts.go",
		Original:    "case d.FleetUID != v.Fleet.UID:",
		Replacement: "case d.FleetUID == \"\":",
		Mistake:     "a disk of another fleet under this one's name treated as its own",
		Threatens:   "disk filter: fleet UID (ForeignDisks hold, status.disks)",
	},
	// Premise checks on fresh reads.
	{
		Name: "premise-newer-fleet-passes", File: "machine/premise.go",
		Original:    "if p.FleetGeneration != 0 && fresh.FleetGeneration != p.FleetGeneration {",
		Replacement: "if p.FleetGeneration != 0 && fresh.FleetGeneration < p.FleetGeneration {",
		Mistake:     "only an older fleet spec refuses; a newer request is overwritten",
		Threatens:   "premise: the fleet's generation; clauses 1, 2",
	},
	{
		Name: "premise-newer-workload-passes", File: "machine/premise.go",
		Original:    "case p.WorkloadExists && fresh.WorkloadGeneration != p.WorkloadGeneration:",
		Replacement: "case p.WorkloadExists && fresh.WorkloadGeneration < p.WorkloadGeneration:",
		Mistake:     "a workload changed since the decision passes the premise",
		Threatens:   "premise: the workload's generation; clause 1",
	},
	{
		Name: "premise-vanished-pod-passes", File: "machine/premise.go",
		Original:    "if pod == nil || !events.PodReady(pod) {",
		Replacement: "if pod != nil && !events.PodReady(pod) {",
		Mistake:     "a member Pod gone since the decision counts as ready",
		Threatens:   "premise: the other members ready; clauses 1, 3",
	},
	{
		Name: "premise-node-back-not-ready-passes", File: "machine/premise.go",
		Original:    "case p.NodeGone && node != nil:",
		Replacement: "case p.NodeGone && node != nil && events.NodeHealth(node).Ready:",
		Mistake:     "a node that came back (not ready yet) still counts as gone",
		Threatens:   "premise: node gone; clause 3 (force only when the node is gone)",
	},
	{
		Name: "premise-recovered-node-passes", File: "machine/premise.go",
		Original:    "if h.UnhealthySince.After(p.NodeUnhealthySince) {",
		Replacement: "if h.UnhealthySince.Before(p.NodeUnhealthySince) {",
		Mistake:     "the comparison inverted: a node that recovered and failed again passes",
		Threatens:   "premise: node unhealthy since; clause 3",
	},
	{
		Name: "premise-scalein-without-ready", File: "machine/plan.go",
		Original:    "a.Premise.Ready = p.readyMembers(\"\")",
		Replacement: "_ = p.readyMembers(\"\")",
		Mistake:     "a scale-in written without asking that every member still be ready",
		Threatens:   "premise of a scale-in; clause 1",
	},
	{
		Name: "premise-heal-without-ready", File: "machine/plan.go",
		Original:    "premise := &Premise{Ready: p.readyMembers(m.Name), OnlyNotReady: m.Name,",
		Replacement: "premise := &Premise{OnlyNotReady: m.Name,",
		Mistake:     "a heal sent without asking that the other members still be ready",
		Threatens:   "premise of a heal; clauses 1, 3",
	},
	{
		Name: "premise-heal-without-node", File: "machine/plan.go",
		Original:    "premise.Node, premise.NodeGone, premise.NodeUnhealthySince = m.NodeName, gone, since",
		Replacement: "_, _ = gone, since",
		Mistake:     "a forced heal sent without asking that the node still be gone or unhealthy",
		Threatens:   "premise of a forced heal; clause 3",
	},
	// Status and the lifecycle's derivation.
	{
		Name: "status-ready-below-target", File: "machine/status.go",
		Original:    "fx.settled() && fx.current == fx.target.Members && fx.hold == \"\"",
		Replacement: "fx.settled() && fx.hold == \"\"",
		Mistake:     "Ready=True while the fleet is not at its requested size",
		Threatens:   "status derivation (Ready condition); clause 10",
	},
	{
		Name: "status-members-not-compared", File: "machine/status.go",
		Original:    "a.State != b.State || a.Members != b.Members ||",
		Replacement: "a.State != b.State ||",
		Mistake:     "member counts left out of the status comparison: stale counts are never republished",
		Threatens:   "status derivation: status is a function of observation (clause 5)",
	},
	{
		Name: "status-read-back-to-decide", File: "machine/fleet.go",
		Original:    "\tswitch s {\n\tcase v1alpha1.StateDeleting:\n\t\treturn TriggerNone",
		Replacement: "\tswitch s {\n\tcase v1alpha1.StateDeleting, fx.view.Fleet.Status.State:\n\t\treturn TriggerNone",
		Mistake:     "the published state read back to avoid deciding twice",
		Threatens:   "clause 5: any stored status gives the same decisions",
	},
	{
		Name: "state-kept-in-memory", File: "machine/fleet.go",
		Original:    "observed := derive(v, fx)\n\tm.state = observed",
		Replacement: "observed := derive(v, fx)\n\tif m.state == \"\" {\n\t\tm.state = observed\n\t}",
		Mistake:     "the machine steps from the state it remembers instead of the observed one",
		Threatens:   "clauses 5, 11: a restart lands in the same state",
	},
	{
		Name: "provisioning-skipped-unsettled", File: "machine/fleet.go",
		Original:    "case !w.Exists || w.Settled < 0:",
		Replacement: "case !w.Exists:",
		Mistake:     "a workload that never finished provisioning read as settled",
		Threatens:   "lifecycle derivation; clauses 1, 10",
	},
	{
		Name: "deleting-entered-unrecorded", File: "machine/fleet.go",
		Original:    "\t\treturn w.Replicas == 0\n",
		Replacement: "\t\treturn true\n",
		Mistake:     "deletion derived as in flight at once: no transition, metric or Event records entering Deleting",
		Threatens:   "honest diagram: Deleting is entered by a recorded transition",
	},
	// Bucket binding, idempotence.
	{
		Name: "bucket-bound-by-name", File: "machine/facts.go",
		Original:    "fx.refused = (r.Exists && r.BoundTo != f.UID)",
		Replacement: "fx.refused = (r.Exists && r.BoundName != f.Name)",
		Mistake:     "the reservation compared by fleet name, not UID: a recreated fleet takes the bucket",
		Threatens:   "clause 9: one bucket, one fleet UID",
	},
	{
		Name: "bucket-rival-ignored", File: "machine/facts.go",
		Original:    "|| (!r.Exists && r.Claimant != nil)",
		Replacement: "|| (!r.Exists && r.Claimant != nil && r.Claimant.UID == f.UID)",
		Mistake:     "with no reservation, a rival fleet's stronger claim is ignored",
		Threatens:   "clause 9: one bucket, one fleet UID",
	},
	{
		Name: "drift-compares-status", File: "render/compare.go",
		Original:    "\tdelete(d, \"status\")\n",
		Replacement: "\n",
		Mistake:     "the desired object's empty status compared with the observed one: every pass re-applies",
		Threatens:   "clause 8: a converged fleet costs zero writes",
	},
	{
		Name: "quiet-ignores-node-health", File: "machine/quiet.go",
		Original:    "\t\t\tflag(n.Ready)\n\t\t\tflag(n.Fenced)\n\t\t\tnum(n.UnhealthySince.Unix())\n",
		Replacement: "\t\t\tflag(n.Fenced)\n",
		Mistake:     "the fingerprint leaves node health out: a node going down decides nothing new",
		Threatens:   "clauses 3, 10: a member that cannot come back is healed",
	},
	{
		Name: "premise-unrolled-workload-passes", File: "machine/premise.go",
		Original:    "case p.RolledOut && !fresh.WorkloadRolledOut:",
		Replacement: "case p.RolledOut && fresh.WorkloadRolledOut && false:",
		Mistake:     "a scale-in goes out while the workload's status says its last change has not rolled out",
		Threatens:   "premise: the previous change rolled out; clause 1",
	},
	{
		Name: "scale-in-without-rollout-premise", File: "machine/plan.go",
		Original:    "\t\t\t\ta.Premise.RolledOut = true\n",
		Replacement: "\n",
		Mistake:     "a scale-in asks nothing of the workload's rollout on the fresh read: a cache behind it lowers replicas mid-change",
		Threatens:   "premise: the previous change rolled out; clause 1",
	},
	{
		Name: "cannot-heal-names-no-member", File: "machine/plan.go",
		Original:    "\"so that it never takes two away at once; to replace it anyway, run kubectl delete pod %s (%s)\",\n\t\tc.member.Name, c.reason, down, c.member.Name, back)",
		Replacement: "\"so that it never takes two away at once; to replace it anyway, run kubectl delete pod %s (%s)\",\n\t\tc.member.Name, c.reason, down, p.v.Name, back)",
		Mistake:     "the status tells a person to delete a Pod that is not the member that cannot come back",
		Threatens:   "clause 10: a fleet waiting on a person says what to do",
	},
	{
		Name: "premise-trusts-ready-pod-on-dead-node", File: "machine/premise.go",
		Original:    "case !events.NodeHealth(n).Ready:",
		Replacement: "case false && !events.NodeHealth(n).Ready:",
		Mistake:     "a member whose Pod still says Ready on a node that stopped answering counts as ready",
		Threatens:   "premise: the other members ready; clauses 1, 3",
	},
	{
		Name: "kube-fresh-reads-no-member-node", File: "drivers/kube/apply.go",
		Original:    "\t\t\tcase err == nil:\n\t\t\t\tfresh.MemberNodes[name] = n\n",
		Replacement: "\t\t\tcase err == nil:\n\t\t\t\tfresh.MemberNodes[name], _ = nil, n\n",
		Mistake:     "the driver's fresh read loses the members' nodes: every member counts as on a gone node",
		Threatens:   "premise: the other members ready; clause 10 (no heal ever goes out)",
	},
	{
		Name: "heal-loops-on-lost-claim", File: "machine/facts.go",
		Original:    "if d != nil && d.Lost && !d.Terminating {\n\t\t\t\t// The StatefulSet",
		Replacement: "if false && d != nil && d.Lost && !d.Terminating {\n\t\t\t\t// The StatefulSet",
		Mistake:     "a member on a Lost claim is replaced again and again: its new Pod mounts the same claim",
		Threatens:   "clause 3: a Pod deleted only to heal what a new Pod fixes",
	},
	{
		Name: "utilization-of-an-earlier-fleet", File: "events/view.go",
		Original:    "if u := o.Utilization; u != nil && !u.Unavailable && u.Time.Before(f.CreationTimestamp.Time) {",
		Replacement: "if u := o.Utilization; u != nil && !u.Unavailable && u.Time.Before(f.CreationTimestamp.Time) && false {",
		Mistake:     "a fleet created under the name of a deleted one inherits its last usage sample",
		Threatens:   "clause 2: growth reaches the target (a recommendation from this fleet's usage)",
	},
	// Capacity observed, or not.
	{
		Name: "unobserved-auto-goes-to-spec-members", File: "capacity/policy.go",
		Original:    "if spec.Capacity.Mode == v1alpha1.CapacityAuto && current > 0 {",
		Replacement: "if spec.Capacity.Mode == v1alpha1.CapacityAuto && current < 0 {",
		Mistake:     "an Auto fleet with no usage observed heads back to spec.members: metrics that go away scale it in",
		Threatens:   "capacity: nothing observed decides nothing, never a scale-in",
	},
	{
		Name: "metrics-down-keeps-last-sample", File: "drivers/kube/capacity.go",
		Original:    "\t\tcase err != nil:\n\t\t\tu = unobserved(now, WhyMetricsNotAnswering)\n",
		Replacement: "\t\tcase err != nil:\n\t\t\tcontinue\n",
		Mistake:     "a metrics API that does not answer (metrics-server down) leaves the last sample deciding",
		Threatens:   "capacity: nothing observed decides nothing, never a scale-in",
	},
	{
		Name: "no-usage-keeps-last-sample", File: "drivers/kube/capacity.go",
		Original:    "\t\t\t\tu = unobserved(now, WhyNoUsage)\n",
		Replacement: "\t\t\t\tcontinue\n",
		Mistake:     "a metrics API with no usage for the members leaves the last sample deciding",
		Threatens:   "capacity: nothing observed decides nothing, never a scale-in",
	},
	{
		Name: "pause-ignored", File: "machine/fleet.go",
		Original:    "if v.Fleet.Paused() {",
		Replacement: "if v.Fleet.Paused() && v.Fleet.Generation < 0 {",
		Mistake:     "a paused fleet is changed like any other",
		Threatens:   "day-2: a paused fleet's objects are not written",
	},
	{
		Name: "memo-ignores-restart", File: "machine/memo.go",
		Original:    "restartedAt: v.Fleet.Annotations[v1alpha1.AnnotationRestartedAt]}",
		Replacement: "restartedAt: \"\"}",
		Mistake:     "the machine remembers the workload matched before a restart was requested: the restart never reaches it",
		Threatens:   "day-2: a requested rolling restart happens",
	},
	{
		Name: "restart-not-rendered", File: "render/pod.go",
		Original:    "t.Annotations = map[string]string{v1alpha1.AnnotationRestartedAt: at}",
		Replacement: "_ = at",
		Mistake:     "the restart annotation never reaches the members' Pod template",
		Threatens:   "day-2: a requested rolling restart happens",
	},
	{
		Name: "anchor-from-the-future-held", File: "capacity/policy.go",
		Original:    "if anchor.Time.After(f.Now) {",
		Replacement: "if anchor.Time.After(f.Now) && f.Window < 0 {",
		Mistake:     "a scale-in request recorded ahead of the clock holds the scale-in for as long as the skew",
		Threatens:   "clause 7: the window is measured from the request, on this clock",
	},
}
