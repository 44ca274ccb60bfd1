package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// sbom writes a CycloneDX SBOM of the operator's binary for every platform with cyclonedx-gomod:
// the main module and every module linked into it, as the Go toolchain recorded them in the
// binary, each with the license found in its source (the module cache), and the Go standard
// library. Without serial number or time stamp, so the same commit gives the same documents.
func (r *release) sbom() error {
	for _, arch := range platforms {
		out := filepath.Join(r.out, r.sbomName(arch))
		cmd := exec.Command(r.cyclonedx, "bin", "-json", "-licenses", "-assert-licenses", "-std", "-noserial", "-notimestamp",
			"-version", r.version, "-output", out, r.binary(arch))
		cmd.Dir = r.root
		// The package URLs name the platform of the go environment, not the binary's.
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("cyclonedx-gomod bin %s: %w\n%s", arch, err, b)
		}
	}
	return nil
}

func (r *release) sbomName(arch string) string {
	return fmt.Sprintf("celld-operator-%s-linux-%s.cdx.json", r.version, arch)
}

func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// checksums writes SHA256SUMS of every file of the release, in the format sha256sum -c reads.
func (r *release) checksums() error {
	entries, err := os.ReadDir(r.out)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == checksumsFile {
			continue
		}
		sum, err := fileSHA256(filepath.Join(r.out, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(r.out, checksumsFile), []byte(b.String()), 0o644)
}
