package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonroot is the user the image runs as, and the one its /etc/passwd names: a process that looks
// itself up (a TLS library, a crash report) finds a name and a home.
const nonroot = "65532"

// ociImage writes the operator's image for every platform as one OCI image index, in an OCI
// layout packed as a tar (an oci-archive: skopeo copy oci-archive:FILE docker://REGISTRY/...
// pushes it; crane push reads the layout once unpacked), with go-containerregistry. Each image
// is two layers: a base with the CA certificates (the operator calls the API server and, through
// celld's buckets' endpoints, nothing else, but a webhook or a proxy may need the system roots),
// /etc/passwd and /etc/group naming the non-root user it runs as, and an empty /tmp; then the
// static binary. Every time stamp is the commit's, so a commit and a CA bundle always give the
// same digests.
func (r *release) ociImage() error {
	labels := map[string]string{
		"org.opencontainers.image.title":    "celld-operator",
		"org.opencontainers.image.version":  r.version,
		"org.opencontainers.image.revision": r.commit,
		"org.opencontainers.image.source":   "https://github.com/celld/celld-operator",
		"org.opencontainers.image.created":  r.created.Format("2006-01-02T15:04:05Z07:00"),
	}
	certs, err := os.ReadFile(r.caBundle)
	if err != nil {
		return fmt.Errorf("the CA certificates for the image's base (-ca-bundle; Debian's ca-certificates package installs them): %w", err)
	}
	base, err := r.layer(map[string]entry{
		"/etc/passwd":                        {data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + nonroot + ":" + nonroot + ":nonroot:/home/nonroot:/sbin/nologin\n"), mode: 0o644},
		"/etc/group":                         {data: []byte("root:x:0:\nnonroot:x:" + nonroot + ":\n"), mode: 0o644},
		"/etc/ssl/certs/ca-certificates.crt": {data: certs, mode: 0o644},
		"/home/nonroot/":                     {dir: true, mode: 0o700, owner: 65532},
		"/tmp/":                              {dir: true, mode: 0o1777},
	})
	if err != nil {
		return fmt.Errorf("base layer: %w", err)
	}
	at := v1.Time{Time: r.created}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range platforms {
		bin, err := os.ReadFile(r.binary(arch))
		if err != nil {
			return err
		}
		top, err := r.layer(map[string]entry{"/celld-operator": {data: bin, mode: 0o755}})
		if err != nil {
			return fmt.Errorf("binary layer %s: %w", arch, err)
		}
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err = mutate.ConfigFile(img, &v1.ConfigFile{
			Architecture: arch,
			OS:           "linux",
			Created:      at,
			Config: v1.Config{
				Entrypoint: []string{"/celld-operator"},
				// As the Dockerfile's, so both images start the same way (e2e TestReleaseInstall).
				Cmd:    []string{"run", "--leader-elect"},
				User:   nonroot + ":" + nonroot,
				Env:    []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
				Labels: labels,
			},
			RootFS: v1.RootFS{Type: "layers"},
		})
		if err != nil {
			return err
		}
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, History: v1.History{Created: at, CreatedBy: "make release VERSION=" + r.version,
				Comment: "CA certificates, the non-root user " + nonroot + ", /tmp"}},
			mutate.Addendum{Layer: top, History: v1.History{Created: at, CreatedBy: "make release VERSION=" + r.version,
				Comment: "the static celld-operator binary"}})
		if err != nil {
			return err
		}
		img = mutate.Annotations(img, labels).(v1.Image)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	r.imageDigest = digest.String()

	dir := filepath.Join(r.tmp, "oci")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": r.version})); err != nil {
		return err
	}
	files := map[string][]byte{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		return err
	}
	archive, err := layerTar(files, r.created)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.out, fmt.Sprintf("celld-operator-%s.oci.tar", r.version)), archive, 0o644)
}

// layer is a gzipped OCI layer of the entries, with the folders above them, at the commit's time.
func (r *release) layer(entries map[string]entry) (v1.Layer, error) {
	data, err := entryTar(entries, r.created)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
