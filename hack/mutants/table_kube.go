package main

// The client-go driver's mistakes about who waits for whom at the client-side limiters, and about
// the capacity history's one-request append.
func init() {
	Table = append(Table,
		Mutant{
			Name: "kube-status-on-moving-client", File: "drivers/kube/apply.go",
			Original:    "got, err := ap.status().CelldV1alpha1().CelldFleets(f.Namespace).Patch(",
			Replacement: "got, err := ap.Celld.CelldV1alpha1().CelldFleets(f.Namespace).Patch(",
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
	)
}
