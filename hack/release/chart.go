package main

import (
	"path/filepath"
	"strings"
)

// chart packages deploy/helm/celld-operator with helm, stamped with the release's version: the
// chart's version is the release's without its v (Helm wants SemVer), its appVersion, and so its
// image's default tag, the release's.
func (r *release) chart() error {
	src := filepath.Join(r.root, "deploy", "helm", "celld-operator")
	if _, err := output(r.root, r.helm, "lint", "--strict", src); err != nil {
		return err
	}
	_, err := output(r.root, r.helm, "package", src, "--version", strings.TrimPrefix(r.version, "v"),
		"--app-version", r.version, "--destination", r.out)
	return err
}
