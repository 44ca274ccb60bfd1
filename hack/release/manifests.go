package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// manifests writes the install manifests: deploy/ and deploy/namespaced/ as kustomize builds
// them, with the operator's image pinned to the release's tag instead of :latest, the CRDs alone
// (an upgrade applies them first), and the monitoring kit.
func (r *release) manifests() error {
	pinned := r.image + ":" + r.version
	for _, m := range []struct{ dir, file string }{
		{"deploy/crds", "celld-operator-crds.yaml"},
		{"deploy", "celld-operator.yaml"},
		{"deploy/namespaced", "celld-operator-namespaced.yaml"},
		{"deploy/monitoring", "celld-operator-monitoring.yaml"},
	} {
		out, err := output(r.root, r.kubectl, "kustomize", m.dir)
		if err != nil {
			return err
		}
		out, err = pin(out, r.image, pinned)
		if err != nil {
			return fmt.Errorf("%s: %w", m.dir, err)
		}
		if err := os.WriteFile(filepath.Join(r.out, m.file), []byte(out+"\n"), 0o644); err != nil {
			return err
		}
	}
	dash, err := os.ReadFile(filepath.Join(r.root, "deploy", "monitoring", "dashboard.json"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.out, "celld-operator-dashboard.json"), dash, 0o644)
}

var imageLine = regexp.MustCompile(`(?m)^(\s*image:\s*)(\S+)\s*$`)

// pin points every image of repo at pinned, and fails on an image of repo left at another tag:
// a release never installs :latest.
func pin(manifest, repo, pinned string) (string, error) {
	var err error
	out := imageLine.ReplaceAllStringFunc(manifest, func(line string) string {
		m := imageLine.FindStringSubmatch(line)
		name, _, _ := strings.Cut(m[2], "@")
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			name = name[:i]
		}
		if name != repo {
			err = fmt.Errorf("image %s is not the operator's (%s): a release ships only its own", m[2], repo)
			return line
		}
		return m[1] + pinned
	})
	return out, err
}
