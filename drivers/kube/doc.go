// Package kube is the in-cluster driver: it feeds the lifecycle machine from client-go informer
// caches and applies the machine's actions to a real API server.
//
// Nothing here decides. Handlers map an object to its fleet's key and enqueue it; a sync rebuilds
// the fleet's events.Observation from the caches, normalizes it, steps the fleet's machine, and
// applies the actions in order, stopping at the first error. The driver is also where the clock is
// read (Observation.Now) and where member usage is sampled from the metrics API.
package kube
