// Package bucketstore is a directory-backed object store over HTTP, the bucket celld's bucket
// durability writes to when no cloud store is at hand. One subdirectory per bucket, one file per
// object; a PUT answers only once the object is on disk.
//
//	PUT /{bucket}/{object}       store (If-None-Match: * creates only; 412 if it exists)
//	GET /{bucket}/{object}       read, 404 if absent
//	GET /{bucket}?prefix=P       {"objects": [names beginning with P, sorted]}
//	GET /healthz
package bucketstore

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var (
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,62}$`)
	// segment keeps every part of an object name a plain file name; temporary files start with a dot.
	segment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)
)

const maxObject = 8 << 20

// Handler serves the buckets under dir.
func Handler(dir string) http.Handler {
	s := &server{dir: dir}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("PUT /{bucket}/{object...}", s.put)
	mux.HandleFunc("GET /{bucket}/{object...}", s.get)
	mux.HandleFunc("GET /{bucket}", s.list)
	return mux
}

type server struct{ dir string }

// path is the file of an object, or "" for a name the store refuses.
func (s *server) path(bucket, object string) string {
	if !bucketName.MatchString(bucket) {
		return ""
	}
	if object == "" {
		return filepath.Join(s.dir, bucket)
	}
	for _, seg := range strings.Split(object, "/") {
		if !segment.MatchString(seg) {
			return ""
		}
	}
	return filepath.Join(s.dir, bucket, filepath.FromSlash(object))
}

func (s *server) put(w http.ResponseWriter, r *http.Request) {
	p := s.path(r.PathValue("bucket"), r.PathValue("object"))
	if p == "" || r.PathValue("object") == "" {
		http.Error(w, "invalid bucket or object name", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxObject))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	err = write(p, body, r.Header.Get("If-None-Match") == "*")
	switch {
	case errors.Is(err, fs.ErrExist):
		http.Error(w, "object exists", http.StatusPreconditionFailed)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// write stores body at p durably. A create-only write links the finished file into place, which
// fails if the name is taken, so two creators never both succeed.
func write(p string, body []byte, createOnly bool) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if createOnly {
		err = os.Link(tmp, p)
	} else {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("object") == "" {
		s.list(w, r)
		return
	}
	p := s.path(r.PathValue("bucket"), r.PathValue("object"))
	if p == "" {
		http.Error(w, "invalid bucket or object name", http.StatusBadRequest)
		return
	}
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, "no such object", http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	}
}

func (s *server) list(w http.ResponseWriter, r *http.Request) {
	root := s.path(r.PathValue("bucket"), "")
	if root == "" {
		http.Error(w, "invalid bucket name", http.StatusBadRequest)
		return
	}
	prefix := r.URL.Query().Get("prefix")
	objects := []string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if name := filepath.ToSlash(rel); strings.HasPrefix(name, prefix) {
			objects = append(objects, name)
		}
		return nil
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	sort.Strings(objects)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string][]string{"objects": objects})
}
