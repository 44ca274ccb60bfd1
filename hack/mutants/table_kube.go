package main

// The client-go driver's mistakes about who waits for whom at the client-side limiters, and about
// the capacity history's one-request append.
func init() {
	Table = append(Table,
		Mutant{
			Name: "kube-heal-premise-reads-a-statefulset", File: "drivers/kube/apply.go",
			Original:    "cur, err := getOwned(ctx, ownedClients[ref.Kind].client(ap.Kube, a.Namespace), ref.Name)",
			Replacement: "cur, err := getOwned(ctx, ownedClients[kinds.StatefulSet].client(ap.Kube, a.Namespace), ref.Name)",
			Mistake:     "a workload premise reads a StatefulSet whatever workload it names: a Deployment's changes pass unseen",
			Threatens:   "premise: the workload a heal names; clause 3",
		},
		Mutant{
			Name: "kube-heal-counted-when-already-gone", File: "drivers/kube/apply.go",
			Original:    "case apierrors.IsNotFound(err):\n\t\treturn nil\n\tcase err != nil:\n\t\treturn fmt.Errorf(\"delete pod %s: %w\", a.Key, err)",
			Replacement: "case apierrors.IsNotFound(err):\n\tcase err != nil:\n\t\treturn fmt.Errorf(\"delete pod %s: %w\", a.Key, err)",
			Mistake:     "a heal answered NotFound (sent again on a cache behind the first) counted as a member deleted",
			Threatens:   "heals_total counts members deleted, not heals asked for",
		},
		Mutant{
			Name: "kube-status-on-moving-client", File: "drivers/kube/apply.go",
			Original:    "got, err := ap.status().CelldV1alpha1().CelldFleets(namespace).Patch(",
			Replacement: "got, err := ap.Celld.CelldV1alpha1().CelldFleets(namespace).Patch(",
			Mistake:     "the fleet's status patched through the client that moves fleets: status writes queue ahead of applies and deletes again",
			Threatens:   "the writes that move fleets never wait behind status writes or Events (a client-side limiter per kind of work)",
		},
		Mutant{
			Name: "kube-events-on-moving-client", File: "drivers/kube/clients.go",
			Original:    "events, err := typedcorev1.NewForConfig(limited(cfg))",
			Replacement: "events, err := typedcorev1.NewForConfig(moving)",
			Mistake:     "the Event broadcaster's client built on the config of the clients that move fleets: Events spend their limiter's tokens",
			Threatens:   "the writes that move fleets never wait behind status writes or Events (a client-side limiter per kind of work)",
		},
		Mutant{
			Name: "kube-history-patch-without-precondition", File: "drivers/kube/apply.go",
			Original:    "\"metadata\": map[string]any{\"resourceVersion\": r.ResourceVersion},",
			Replacement: "\"metadata\": map[string]any{},",
			Mistake:     "the history patch sent without the resourceVersion it was built on: an append the cache had not shown yet is overwritten",
			Threatens:   "AppendHistory's optimistic concurrency: an append never overwrites one it has not seen (the history the step policy decides on)",
		},
		Mutant{
			Name: "kube-history-answer-outlives-cache", File: "drivers/kube/apply.go",
			Original:    "case cached == nil || (cached.UID == mine.answer.UID && cachedRV == mine.on):",
			Replacement: "case cached == nil || cached.UID == mine.answer.UID:",
			Mistake:     "the answer to the last history append is trusted after the cache showed someone else's write: a cleared history is taken to hold the decision, and nothing is appended",
			Threatens:   "clause 6: a scale-in request cleared by hand is recorded again, and its window restarts",
		},
		// The status writer: a sync hands the status over and goes on.
		Mutant{
			Name: "kube-status-written-in-the-sync", File: "drivers/kube/controller.go",
			Original:    "if a.Kind == machine.PublishStatus && a.Status != nil {",
			Replacement: "if a.Kind == machine.PublishStatus && a.Status == nil {",
			Mistake:     "the driver sends the status itself: every sync waits on a status round trip again",
			Threatens:   "the writes that move fleets never wait behind status writes (issue 12)",
		},
		Mutant{
			Name: "kube-status-writer-paced-first", File: "drivers/kube/statuswriter.go",
			Original:    "if len(w.urgent) > 0 {\n\t\tkey, w.urgent = w.urgent[0], w.urgent[1:]",
			Replacement: "if len(w.paced) == 0 {\n\t\tkey, w.urgent = w.urgent[0], w.urgent[1:]",
			Mistake:     "the writer takes progress before the statuses readers act on: a fleet's arrival waits behind every fleet's member counts",
			Threatens:   "a status a reader acts on (state, conditions, arrival) is written first",
		},
		Mutant{
			Name: "kube-status-writer-keeps-older", File: "drivers/kube/statuswriter.go",
			Original:    "e.next, e.nextSeq = st.DeepCopy(), w.seq",
			Replacement: "if e.next == nil {\n\t\te.next, e.nextSeq = st.DeepCopy(), w.seq\n\t}",
			Mistake:     "a status handed over while another waits is dropped instead of replacing it: the fleet shows an older status than the machine decided",
			Threatens:   "the latest status wins (issue 12); clause 5",
		},
		Mutant{
			Name: "kube-status-writer-overlay-outlives-cache", File: "drivers/kube/statuswriter.go",
			Original:    "if cachedRV != e.answeredOn {",
			Replacement: "if false && cachedRV != e.answeredOn {",
			Mistake:     "the answer to a status write is overlaid after the caches moved on: someone else's later write of the status is never seen, and never replaced",
			Threatens:   "a status someone else overwrote is written again (the fleet shows what the machine asked for)",
		},
		Mutant{
			Name: "kube-status-writer-recreated-fleet-stranded", File: "drivers/kube/statuswriter.go",
			Original:    "\t\tif cur != nil && cur.next != nil {\n\t\t\tw.enqueue(key, true)\n\t\t}\n",
			Replacement: "",
			Mistake:     "a fleet forgotten while its status was being written and recreated under the name: the new fleet's status, held back for that write, is never sent",
			Threatens:   "every status handed over is written (the latest of each fleet)",
		},
		Mutant{
			Name: "kube-status-writer-not-requeued", File: "drivers/kube/controller.go",
			Original:    "\t\tctl.queue.AddRateLimited(key)\n\t}",
			Replacement: "\t}",
			Mistake:     "a failed status write is logged and nothing else: the fleet shows a stale status until something else changes",
			Threatens:   "a failed status write is asked for again",
		},
		Mutant{
			Name: "kube-status-writer-concurrent-per-fleet", File: "drivers/kube/statuswriter.go",
			Original:    "\tif w.busy[key] {\n\t\treturn // done requeues it\n\t}\n",
			Replacement: "",
			Mistake:     "a fleet with a write in flight is queued again at once: two writes of one fleet race, and the older may land last",
			Threatens:   "one status write in flight per fleet; the latest status wins",
		},
		Mutant{
			Name: "loop-overlay-not-fingerprinted", File: "loop/loop.go",
			Original:    "obs.Fleet, obs.FleetOverlay = o.Overlay(key, obs.Fleet, cachedRV)",
			Replacement: "obs.Fleet, _ = o.Overlay(key, obs.Fleet, cachedRV)",
			Mistake:     "the status overlaid on the fleet is left out of the view's fingerprint: a decision made while a write was on its way (nothing to do) is kept after the write failed, and the status is never asked for again",
			Threatens:   "a failed status write is asked for again; the converged-step memo holds only for the same view",
		},
		Mutant{
			Name: "events-fingerprint-forgets-overlay", File: "events/fingerprint.go",
			Original:    "\tnum(int64(v.FleetOverlay))\n",
			Replacement: "",
			Mistake:     "the fingerprint hashes the fleet's resourceVersion alone, which an overlaid status does not change",
			Threatens:   "the converged-step memo holds only for the same view",
		},
		Mutant{
			Name: "status-reader-acts-ignores-state", File: "machine/status.go",
			Original:    "if published == nil || published.State != st.State || len(published.Conditions) != len(st.Conditions) {",
			Replacement: "if published == nil || len(published.Conditions) != len(st.Conditions) {",
			Mistake:     "a change of state alone is taken for progress: it waits behind every fleet's counts",
			Threatens:   "a status a reader acts on (state, conditions, arrival) is written first",
		},
		Mutant{
			Name: "kube-disk-delete-at-decided-version", File: "drivers/kube/apply.go",
			Original:    "		rv = c.ResourceVersion\n",
			Replacement: "\n",
			Mistake:     "the disk delete carries the decision's resourceVersion though a fresh read confirmed the claim: a claim some controller touched is refused, retried, written twice",
			Threatens:   "writes per lifecycle (one delete per disk)",
		},
	)
}
