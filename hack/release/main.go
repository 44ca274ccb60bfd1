// Command release writes a release of the operator into a folder (make release VERSION=vX.Y.Z):
// the install manifests pinned to the release's image, the Helm chart, the operator's image for
// linux/amd64 and linux/arm64 as an OCI archive (no container engine needed), the kubectl plugin
// for the same platforms, and as archives for Linux and macOS with its krew manifest, a
// CycloneDX SBOM of the operator binary's modules per platform, SHA256SUMS of every file, and,
// given a cosign key, SHA256SUMS signed and the release's SLSA provenance attested.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// semver is a release version as the chart and the image tag carry it: vMAJOR.MINOR.PATCH with an
// optional pre-release.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// platforms the image is built for.
var platforms = []string{"amd64", "arm64"}

type release struct {
	root, out, version, commit, image string
	kubectl, helm, cyclonedx          string
	downloads                         string
	// caBundle is the CA certificates the image's base carries.
	caBundle string
	// imageDigest is the image index's digest, once written.
	imageDigest string
	// cosign signs with cosignKey, when one is given.
	cosign, cosignKey string
	started           time.Time
	created           time.Time
	tmp               string
}

func main() {
	var r release
	flag.StringVar(&r.version, "version", "", "the release's version, vX.Y.Z (required)")
	flag.StringVar(&r.out, "out", "", "the folder to write (default _release/VERSION); emptied first")
	flag.StringVar(&r.image, "image", "ghcr.io/celld/celld-operator", "the image repository the manifests and the chart name")
	flag.StringVar(&r.kubectl, "kubectl", "", "kubectl, for kustomize (default .cache/cluster/bin/kubectl, from cluster/build.sh)")
	flag.StringVar(&r.helm, "helm", "", "helm, to package the chart (default .cache/cluster/bin/helm, from cluster/tools.sh)")
	flag.StringVar(&r.cyclonedx, "cyclonedx-gomod", "", "cyclonedx-gomod, to write the SBOMs (default .cache/cluster/bin/cyclonedx-gomod, from cluster/tools.sh)")
	flag.StringVar(&r.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates (PEM) the image's base carries")
	flag.StringVar(&r.cosignKey, "cosign-key", "", "the cosign private key that signs SHA256SUMS and the provenance (its password in COSIGN_PASSWORD); none: an unsigned release")
	flag.StringVar(&r.cosign, "cosign", "", "cosign (default .cache/cluster/bin/cosign, from cluster/tools.sh)")
	flag.Func("platforms", "the architectures of the image and the binaries, comma-separated (default amd64,arm64: what a release ships; a test that runs one may build only it)", func(v string) error {
		list, err := oneOf(v, "amd64", "arm64")
		platforms = list
		return err
	})
	flag.Func("plugin-systems", "the systems the kubectl plugin is built for, comma-separated (default linux,darwin)", func(v string) error {
		list, err := oneOf(v, "linux", "darwin")
		pluginSystems = list
		return err
	})
	flag.StringVar(&r.downloads, "downloads", "https://github.com/celld/celld-operator/releases/download", "where the release's files are published: the krew manifest names each plugin archive at DOWNLOADS/VERSION/FILE")
	flag.Parse()
	if err := r.run(); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func (r *release) run() error {
	r.started = time.Now()
	if !semver.MatchString(r.version) {
		return fmt.Errorf("-version %q: want vMAJOR.MINOR.PATCH, for example v0.1.0", r.version)
	}
	root, err := output("", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("run inside the repository: %w", err)
	}
	r.root = root
	// The commit and its time stamp the binaries and the image, so the same commit gives the same
	// artifacts.
	if r.commit, err = output(root, "git", "rev-parse", "HEAD"); err != nil {
		return err
	}
	ct, err := output(root, "git", "log", "-1", "--format=%ct")
	if err != nil {
		return err
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return fmt.Errorf("commit time %q: %w", ct, err)
	}
	r.created = time.Unix(secs, 0).UTC()
	if r.out == "" {
		r.out = filepath.Join(root, "_release", r.version)
	}
	if r.kubectl == "" {
		r.kubectl = filepath.Join(root, ".cache", "cluster", "bin", "kubectl")
	}
	if r.helm == "" {
		r.helm = filepath.Join(root, ".cache", "cluster", "bin", "helm")
	}
	if r.cosign == "" {
		r.cosign = filepath.Join(root, ".cache", "cluster", "bin", "cosign")
	}
	if r.cyclonedx == "" {
		r.cyclonedx = filepath.Join(root, ".cache", "cluster", "bin", "cyclonedx-gomod")
	}
	if err := os.RemoveAll(r.out); err != nil {
		return err
	}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return err
	}
	if r.tmp, err = os.MkdirTemp("", "celld-release-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.tmp)

	steps := []struct {
		what string
		do   func() error
	}{
		{"install manifests", r.manifests},
		{"Helm chart", r.chart},
		{"binaries", r.binaries},
		{"OCI image", r.ociImage},
		{"SBOM", r.sbom},
		{"krew plugin", r.krew},
		{"checksums", r.checksums},
		{"signatures and provenance", r.sign},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		fmt.Printf("release %s: %s in %s\n", r.version, s.what, time.Since(start).Round(100*time.Millisecond))
	}
	fmt.Printf("release %s written to %s\n", r.version, r.out)
	return nil
}

// binaries builds the operator for every platform into the scratch folder (the image holds it),
// and the kubectl plugin for Linux and macOS on the same architectures (the Linux ones also into
// the release, as they are), each stamped with the version, the commit and, as its build date,
// the commit's time (so the same commit gives the same binary), without cgo (the image has no C
// library).
func (r *release) binaries() error {
	for _, arch := range platforms {
		if err := r.build("./cmd/celld-operator", "linux", arch, r.binary(arch)); err != nil {
			return err
		}
		for _, goos := range pluginSystems {
			if err := r.build("./cmd/kubectl-celld", goos, arch, r.plugin(goos, arch)); err != nil {
				return err
			}
		}
		if err := copyFile(r.plugin("linux", arch), filepath.Join(r.out, "kubectl-celld-linux-"+arch)); err != nil {
			return err
		}
	}
	return nil
}

func (r *release) build(pkg, goos, arch, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags",
		fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.date=%s", r.version, r.commit, r.created.Format(time.RFC3339)), "-o", out, pkg)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+arch, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s %s/%s: %w\n%s", pkg, goos, arch, err, b)
	}
	return nil
}

func (r *release) binary(arch string) string {
	return filepath.Join(r.tmp, "celld-operator-linux-"+arch)
}

func (r *release) plugin(goos, arch string) string {
	return filepath.Join(r.tmp, "kubectl-celld-"+goos+"-"+arch)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// output runs a command and returns its trimmed standard output.
func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// oneOf splits a comma-separated list whose every item is one of allowed, without repeats.
func oneOf(v string, allowed ...string) ([]string, error) {
	var out []string
	for _, x := range strings.Split(v, ",") {
		if !slices.Contains(allowed, x) || slices.Contains(out, x) {
			return nil, fmt.Errorf("%q: want some of %s, each once", x, strings.Join(allowed, ", "))
		}
		out = append(out, x)
	}
	return out, nil
}
