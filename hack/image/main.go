// Command image writes a container image archive from files on this machine, without a
// container engine: one layer holding the files, a config naming the entrypoint and user, and the
// archive in the format `ctr images import` and `docker load` read. The real-node mode builds the
// pause, busybox and celld images with it.
//
//	go run ./hack/image -o OUT.tar -ref NAME:TAG [-entrypoint PATH[,ARG...]] [-user UID]
//	    [-env K=V]... [-busybox /bin/busybox] [SRC=DST]...
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The applets the local-path provisioner's helper scripts and a debugging shell use.
var busyboxApplets = []string{"sh", "mkdir", "rm", "rmdir", "chmod", "chown", "ls", "cat", "echo", "sleep", "test", "[", "stat", "du", "df", "touch", "id", "env", "true", "false", "wget", "nslookup", "ps", "grep", "ip", "hostname"}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

type entry struct {
	data []byte
	mode int64
	link string
}

func main() {
	out := flag.String("o", "", "the archive to write")
	ref := flag.String("ref", "", "the image's name and tag")
	entrypoint := flag.String("entrypoint", "", "the entrypoint, comma separated")
	user := flag.String("user", "65532", "the user the image runs as")
	busybox := flag.String("busybox", "", "a static busybox to install at /bin/busybox with its applets")
	var env multi
	flag.Var(&env, "env", "an environment variable K=V (repeatable)")
	flag.Parse()
	if err := run(*out, *ref, *entrypoint, *user, *busybox, env, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, ref, entrypoint, user, busybox string, env, files []string) error {
	if out == "" || ref == "" {
		return fmt.Errorf("-o and -ref are required")
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", ref, err)
	}
	entries := map[string]entry{}
	for _, f := range files {
		src, dst, ok := strings.Cut(f, "=")
		if !ok || !path.IsAbs(dst) {
			return fmt.Errorf("file %q: want SRC=/DST", f)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		entries[dst] = entry{data: data, mode: 0o755}
	}
	if busybox != "" {
		data, err := os.ReadFile(busybox)
		if err != nil {
			return err
		}
		entries["/bin/busybox"] = entry{data: data, mode: 0o755}
		for _, a := range busyboxApplets {
			entries["/bin/"+a] = entry{link: "busybox"}
		}
	}
	layerTar, err := tarOf(entries)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	cfg := v1.Config{User: user, Env: append([]string{"PATH=/bin:/usr/bin"}, env...)}
	if entrypoint != "" {
		cfg.Entrypoint = strings.Split(entrypoint, ",")
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return err
	}
	// Appended after the config is set, so the config's rootfs names the layer.
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// tarOf writes the entries, with the folders above them, in a fixed order and time, so the same
// files give the same layer digest.
func tarOf(entries map[string]entry) ([]byte, error) {
	dirs := map[string]bool{}
	for p := range entries {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// The folders a read-only root filesystem still needs to exist to mount over.
	for _, d := range []string{"/tmp", "/etc", "/proc", "/sys", "/dev"} {
		dirs[d] = true
	}
	names := make([]string, 0, len(dirs)+len(entries))
	for d := range dirs {
		names = append(names, d)
	}
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, n := range names {
		h := &tar.Header{Name: strings.TrimPrefix(n, "/"), ModTime: epoch, Format: tar.FormatPAX}
		e, isFile := entries[n]
		switch {
		case !isFile:
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
			if n == "/tmp" {
				h.Mode = 0o1777
			}
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, e.mode, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if isFile && e.link == "" {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
