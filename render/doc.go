// Package render turns a fleet's spec into the objects the operator applies: one file per kind,
// each a pure function of the fleet (and, for the workload, the size to run). It decides
// nothing: the machine asks it for objects, and compares them with what is observed (Matches).
package render
