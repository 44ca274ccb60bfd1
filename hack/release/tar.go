package main

import (
	"archive/tar"
	"bytes"
	"path"
	"sort"
	"strings"
	"time"
)

// entry is one file or folder of a tarball; a folder's path ends in a slash.
type entry struct {
	data  []byte
	mode  int64
	dir   bool
	owner int
}

// entryTar packs the entries, with the folders above them (root's, 0755), in name order, at one
// time stamp, so the same entries always give the same bytes.
func entryTar(entries map[string]entry, at time.Time) ([]byte, error) {
	all := map[string]entry{}
	for p, e := range entries {
		p = strings.TrimPrefix(p, "/")
		if e.dir {
			p = strings.TrimSuffix(p, "/") + "/"
		}
		all[p] = e
		for d := path.Dir(strings.TrimSuffix(p, "/")); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := all[d+"/"]; !ok {
				all[d+"/"] = entry{dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: n, ModTime: at, Format: tar.FormatPAX, Mode: e.mode, Uid: e.owner, Gid: e.owner}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !e.dir {
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

// layerTar packs plain files (path -> content, mode 0644) as entryTar does.
func layerTar(files map[string][]byte, at time.Time) ([]byte, error) {
	entries := make(map[string]entry, len(files))
	for p, data := range files {
		entries[p] = entry{data: data, mode: 0o644}
	}
	return entryTar(entries, at)
}
