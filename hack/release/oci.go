package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// The OCI image-spec media types; the image is written by hand, as the spec lays it out, rather
// than with a registry client library: a layout is a few JSON files and blobs named by digest.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// layout collects the blobs of an OCI image layout.
type layout struct{ blobs map[string][]byte }

func (l *layout) add(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	l.blobs[d] = data
	return descriptor{MediaType: mediaType, Digest: d, Size: int64(len(data))}
}

func (l *layout) addJSON(mediaType string, v any) (descriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, err
	}
	return l.add(mediaType, data), nil
}

// ociImage writes the operator's image for every platform as one OCI image index, in an OCI
// layout packed as a tar (an oci-archive: skopeo copy oci-archive:FILE docker://REGISTRY/...
// pushes it; crane push reads the layout once unpacked). Each image is the static binary alone
// on an empty base, run as a non-root user; every time stamp is the commit's, so a commit always
// gives the same digests.
func (r *release) ociImage() error {
	l := &layout{blobs: map[string][]byte{}}
	labels := map[string]string{
		"org.opencontainers.image.title":    "celld-operator",
		"org.opencontainers.image.version":  r.version,
		"org.opencontainers.image.revision": r.commit,
		"org.opencontainers.image.source":   "https://github.com/celld/celld-operator",
		"org.opencontainers.image.created":  r.created.Format(time.RFC3339),
	}
	var manifests []descriptor
	for _, arch := range platforms {
		bin, err := os.ReadFile(r.binary(arch))
		if err != nil {
			return err
		}
		tarball, err := layerTar(map[string][]byte{"celld-operator": bin}, r.created)
		if err != nil {
			return err
		}
		diffID := sha256.Sum256(tarball)
		gz, err := gzipped(tarball)
		if err != nil {
			return err
		}
		layer := l.add(mediaLayer, gz)
		config, err := l.addJSON(mediaConfig, map[string]any{
			"created":      r.created.Format(time.RFC3339),
			"architecture": arch,
			"os":           "linux",
			"config": map[string]any{
				"Entrypoint": []string{"/celld-operator"},
				"Cmd":        []string{"run"},
				"User":       "65532:65532",
				"Labels":     labels,
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
			"history": []map[string]string{{"created": r.created.Format(time.RFC3339),
				"created_by": "make release VERSION=" + r.version, "comment": "the static celld-operator binary"}},
		})
		if err != nil {
			return err
		}
		m, err := l.addJSON(mediaManifest, map[string]any{
			"schemaVersion": 2, "mediaType": mediaManifest, "config": config, "layers": []descriptor{layer}, "annotations": labels,
		})
		if err != nil {
			return err
		}
		m.Platform = &platform{Architecture: arch, OS: "linux"}
		manifests = append(manifests, m)
	}
	index, err := l.addJSON(mediaIndex, map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": manifests, "annotations": labels})
	if err != nil {
		return err
	}
	index.Annotations = map[string]string{"org.opencontainers.image.ref.name": r.version}
	top, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{index}})
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`),
		"index.json": top,
	}
	for d, data := range l.blobs {
		files["blobs/sha256/"+d[len("sha256:"):]] = data
	}
	archive, err := layerTar(files, r.created)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.out, fmt.Sprintf("celld-operator-%s.oci.tar", r.version)), archive, 0o644)
}

// layerTar packs files (path -> content) in name order, with their folders, owned by root, at
// one time stamp; executables are what starts with an ELF header.
func layerTar(files map[string][]byte, at time.Time) ([]byte, error) {
	var names []string
	dirs := map[string]bool{}
	for name := range files {
		names = append(names, name)
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		h := &tar.Header{Name: name, ModTime: at, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		data, isFile := files[name]
		switch {
		case !isFile:
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case bytes.HasPrefix(data, []byte("\x7fELF")):
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o755, int64(len(data))
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if isFile {
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
