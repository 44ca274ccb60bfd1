package bucketstore

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func do(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestBucketStore(t *testing.T) {
	dir := t.TempDir()
	srv := httptest.NewServer(Handler(dir))
	defer srv.Close()
	u := srv.URL

	for _, put := range []struct{ object, body string }{{"keys/a", "1"}, {"keys/b", "2"}, {"other", "3"}, {"keys/a", "4"}} {
		if code, msg := do(t, http.MethodPut, u+"/fleet-a/"+put.object, put.body); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", put.object, code, msg)
		}
	}
	if code, body := do(t, http.MethodGet, u+"/fleet-a/keys/a", ""); code != http.StatusOK || body != "4" {
		t.Errorf("GET keys/a = %d %q, want the last write", code, body)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "fleet-a", "keys", "b")); err != nil || string(b) != "2" {
		t.Errorf("object not a file under its bucket's directory: %q %v", b, err)
	}
	if code, _ := do(t, http.MethodGet, u+"/fleet-a/keys/zz", ""); code != http.StatusNotFound {
		t.Errorf("GET of an absent object: %d", code)
	}
	var l struct{ Objects []string }
	_, body := do(t, http.MethodGet, u+"/fleet-a?prefix=keys/", "")
	if err := json.Unmarshal([]byte(body), &l); err != nil || !slices.Equal(l.Objects, []string{"keys/a", "keys/b"}) {
		t.Errorf("list prefix keys/ = %s (%v)", body, err)
	}
	_, body = do(t, http.MethodGet, u+"/fleet-b", "")
	if strings.TrimSpace(body) != `{"objects":[]}` {
		t.Errorf("list of a bucket never written = %s", body)
	}

	if code, _ := do(t, http.MethodPut, u+"/fleet-a/claim", "uid-1", "If-None-Match", "*"); code != http.StatusOK {
		t.Errorf("create-only PUT of a new object: %d", code)
	}
	if code, _ := do(t, http.MethodPut, u+"/fleet-a/claim", "uid-2", "If-None-Match", "*"); code != http.StatusPreconditionFailed {
		t.Errorf("create-only PUT of an existing object: %d, want 412", code)
	}
	if _, body := do(t, http.MethodGet, u+"/fleet-a/claim", ""); body != "uid-1" {
		t.Errorf("create-only PUT replaced the object: %q", body)
	}

	for _, bad := range []string{"/fleet-a/..%2fescape", "/fleet-a/.tmp-1", "/UPPER/x", "/fleet-a/-dash"} {
		if code, _ := do(t, http.MethodPut, u+bad, "x"); code/100 == 2 {
			t.Errorf("PUT %s accepted", bad)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "fleet-a" {
			t.Errorf("unexpected entry %s in the store's directory", e.Name())
		}
	}
}
