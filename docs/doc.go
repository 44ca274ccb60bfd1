// Package docs holds no code: its test keeps docs/architecture.md true to the import graph.
package docs
