// Package deploy holds no code: its tests check the manifests beside it, the monitoring kit and
// the Helm chart, against the operator (the metrics it exports) and against each other.
package deploy
