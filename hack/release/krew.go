package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// pluginSystems are the operating systems the kubectl plugin is released for: where platform
// teams run kubectl.
var pluginSystems = []string{"linux", "darwin"}

// krewManifest is the file to submit to a krew index (as plugins/celld.yaml) so that
// `kubectl krew install celld` installs the plugin.
const krewManifest = "celld.krew.yaml"

// krew writes the plugin's archive for every system and architecture and the krew manifest that
// names each with its checksum.
func (r *release) krew() error {
	type platform struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		URI    string `json:"uri"`
		SHA256 string `json:"sha256"`
		Bin    string `json:"bin"`
	}
	var entries []platform
	for _, goos := range pluginSystems {
		for _, arch := range platforms {
			name := fmt.Sprintf("kubectl-celld-%s-%s.tar.gz", goos, arch)
			if err := r.archive(r.plugin(goos, arch), filepath.Join(r.out, name)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			sum, err := fileSHA256(filepath.Join(r.out, name))
			if err != nil {
				return err
			}
			p := platform{URI: fmt.Sprintf("%s/%s/%s", r.downloads, r.version, name), SHA256: sum, Bin: "kubectl-celld"}
			p.Selector.MatchLabels = map[string]string{"os": goos, "arch": arch}
			entries = append(entries, p)
		}
	}
	m := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]any{"name": "celld"},
		"spec": map[string]any{
			"version":          r.version,
			"homepage":         "https://github.com/celld/celld-operator",
			"shortDescription": "Show and drive celld fleets run by celld-operator",
			"description": "Shows one celld fleet in one screen (its state, conditions, members with their\n" +
				"nodes, zones, revisions and disks, its bucket's reservation and capacity decisions),\n" +
				"or as JSON or YAML, and pauses, resumes or restarts it. It reads what the API server\n" +
				"has; pause, resume and restart each set one annotation of the fleet.\n",
			"platforms": entries,
		},
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.out, krewManifest), b, 0o644)
}

// archive writes a gzipped tarball holding one executable, kubectl-celld, stamped with the
// commit's time and no owner, so that the same commit gives the same archive and checksum.
func (r *release) archive(bin, out string) error {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	hdr := &tar.Header{Name: "kubectl-celld", Mode: 0o755, Size: int64(len(exe)), ModTime: r.created, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := tw.Write(exe); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
