package main

// The client-go driver's mistakes about the premises' fresh reads: which node read may confirm a
// sync's premise when the reads are shared between syncs, and in which order the reads go.
func init() {
	Table = append(Table,
		Mutant{
			Name: "kube-node-read-shared-at-decision", File: "drivers/kube/nodereads.go",
			Original:    "if rd == nil || !rd.sent.After(decided) {",
			Replacement: "if rd == nil || rd.sent.Before(decided) {",
			Mistake:     "\"sent after the decision\" written as \"not sent before it\": a node read sent at the very time of the decision confirms it",
			Threatens:   "premises of a forced heal, a replacement and a scale-in: the node is confirmed on a read made after the decision (clauses 1, 3)",
		},
		Mutant{
			Name: "kube-node-read-error-shared", File: "drivers/kube/nodereads.go",
			Original:    "\t\tif !rd.failed {\n\t\t\treturn rd.node, rd.err\n\t\t}",
			Replacement: "\t\treturn rd.node, rd.err",
			Mistake:     "a caller that waited for another sync's node read takes its answer whatever it was: a failed read's error goes to every waiter",
			Threatens:   "a failed node read costs only its sender's step: the other syncs confirm their premises on reads of their own",
		},
		Mutant{
			Name: "kube-member-nodes-before-members", File: "drivers/kube/apply.go",
			Original:    "\t\t\tpods, podsErr = ap.members(ctx, t, a)\n\t\t\tif podsErr == nil {\n\t\t\t\tmemberNodes = ap.memberNodes(ctx, pods, decided)\n\t\t\t}\n\t\t})",
			Replacement: "\t\t\tpods, podsErr = ap.members(ctx, t, a)\n\t\t})\n\t\tread(func() {\n\t\t\tmemberNodes = ap.memberNodes(ctx, pods, decided)\n\t\t})",
			Mistake:     "every premise read sent at once, the members' nodes included: they are read before the members list says which nodes they are",
			Threatens:   "premises of a heal and a scale-in: every other member ready on a node that is ready (clause 1)",
		},
	)
}
