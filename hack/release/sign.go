package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// The files signing adds to a release; SHA256SUMS names every other file, so its signature and
// the provenance of it cover them all.
const (
	checksumsFile  = "SHA256SUMS"
	signatureFile  = "SHA256SUMS.sigstore.json"
	provenanceFile = "SHA256SUMS.provenance.sigstore.json"
	publicKeyFile  = "cosign.pub"
	// provenanceType is SLSA provenance v1, as cosign names the predicate type.
	provenanceType = "slsaprovenance1"
	buildType      = "https://github.com/celld/celld-operator/make-release/v1"
)

// sign signs SHA256SUMS with cosign and the release's key, and attests an in-toto statement of
// SLSA v1 provenance for it: the commit built, the toolchain, the image index's digest. Both are
// Sigstore bundles written offline (no transparency log: a private key is the trust root, and a
// release machine need not reach the internet), verified with the public key the release also
// carries:
//
//	cosign verify-blob --key cosign.pub --bundle SHA256SUMS.sigstore.json --insecure-ignore-tlog SHA256SUMS
//	cosign verify-blob-attestation --key cosign.pub --bundle SHA256SUMS.provenance.sigstore.json \
//	  --type slsaprovenance1 --insecure-ignore-tlog SHA256SUMS
//	sha256sum -c SHA256SUMS
//
// With no key, the release is written unsigned, and says so.
func (r *release) sign() error {
	if r.cosignKey == "" {
		fmt.Printf("release %s: unsigned (no -cosign-key; make release COSIGN_KEY=FILE signs it)\n", r.version)
		return nil
	}
	cosign := func(args ...string) error {
		cmd := exec.Command(r.cosign, args...)
		cmd.Dir = r.out
		cmd.Env = append(os.Environ(), "COSIGN_YES=true")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("cosign %s: %w\n%s", strings.Join(args, " "), err, b)
		}
		return nil
	}
	pub, err := exec.Command(r.cosign, "public-key", "--key", r.cosignKey).Output()
	if err != nil {
		return fmt.Errorf("cosign public-key --key %s (its password in COSIGN_PASSWORD): %w", r.cosignKey, err)
	}
	if err := os.WriteFile(filepath.Join(r.out, publicKeyFile), pub, 0o644); err != nil {
		return err
	}
	if err := cosign("sign-blob", "--key", r.cosignKey, "--tlog-upload=false", "--bundle", signatureFile, checksumsFile); err != nil {
		return err
	}
	predicate, err := r.provenance()
	if err != nil {
		return err
	}
	path := filepath.Join(r.tmp, "provenance.json")
	if err := os.WriteFile(path, predicate, 0o644); err != nil {
		return err
	}
	return cosign("attest-blob", "--key", r.cosignKey, "--tlog-upload=false", "--type", provenanceType,
		"--predicate", path, "--bundle", provenanceFile, checksumsFile)
}

// provenance is the SLSA v1 provenance predicate of this run of make release.
func (r *release) provenance() ([]byte, error) {
	goVersion, err := output(r.root, "go", "env", "GOVERSION")
	if err != nil {
		return nil, err
	}
	dirty, err := output(r.root, "git", "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(map[string]any{
		"buildDefinition": map[string]any{
			"buildType": buildType,
			"externalParameters": map[string]any{
				"version": r.version,
				"image":   r.image,
			},
			"internalParameters": map[string]any{
				"go":       goVersion,
				"platform": runtime.GOOS + "/" + runtime.GOARCH,
				// A release from a tree with uncommitted changes is not the commit it names.
				"treeClean": dirty == "",
			},
			"resolvedDependencies": []map[string]any{{
				"uri":    "git+https://github.com/celld/celld-operator@refs/tags/" + r.version,
				"digest": map[string]string{"gitCommit": r.commit},
			}},
		},
		"runDetails": map[string]any{
			"builder":  map[string]any{"id": "https://github.com/celld/celld-operator/hack/release"},
			"metadata": map[string]any{"startedOn": r.started.UTC().Format(time.RFC3339), "finishedOn": time.Now().UTC().Format(time.RFC3339)},
			// The image is no file of the release but an index inside the OCI archive: a
			// registry shows it by this digest once pushed.
			"byproducts": []map[string]any{{
				"name":      r.image + ":" + r.version,
				"mediaType": "application/vnd.oci.image.index.v1+json",
				"digest":    map[string]string{"sha256": strings.TrimPrefix(r.imageDigest, "sha256:")},
			}},
		},
	}, "", "  ")
}
