package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// chart packages deploy/helm/celld-operator with the release's version: the chart's version is
// the release's without its v (Helm wants SemVer), its appVersion, and so its image's default
// tag, the release's.
func (r *release) chart() error {
	src := filepath.Join(r.root, "deploy", "helm", "celld-operator")
	dst := filepath.Join(r.tmp, "chart", "celld-operator")
	if err := copyTree(src, dst); err != nil {
		return err
	}
	path := filepath.Join(dst, "Chart.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(raw)
	for field, value := range map[string]string{"version": strings.TrimPrefix(r.version, "v"), "appVersion": r.version} {
		re := regexp.MustCompile(`(?m)^` + field + `:.*$`)
		if !re.MatchString(s) {
			return fmt.Errorf("%s has no %s", path, field)
		}
		s = re.ReplaceAllString(s, field+": "+value)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return err
	}
	if _, err := output(r.root, r.helm, "lint", "--strict", dst); err != nil {
		return err
	}
	_, err = output(r.root, r.helm, "package", dst, "--destination", r.out)
	return err
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
