package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// member keeps what it is given and lists it, as celld's client API does.
func member(t *testing.T) string {
	var mu sync.Mutex
	keys := map[string]string{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("X-Celld-Member", "m0")
		if r.Method == http.MethodPut {
			b, _ := io.ReadAll(r.Body)
			keys[strings.TrimPrefix(r.URL.Path, "/v1/keys/")] = hashOf(b)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func run(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := mainArgs(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestWriteThenCheck(t *testing.T) {
	addr := member(t)
	journal := filepath.Join(t.TempDir(), "acks.jsonl")
	code, out, errOut := run("write", "--members", addr, "--journal", journal, "--duration", "200ms", "--rate", "100")
	if code != 0 || !strings.Contains(out, "acknowledged") {
		t.Fatalf("write: %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run("check", "--members", addr, "--journal", journal)
	if code != 0 || !strings.Contains(out, " 0 lost") {
		t.Fatalf("check: %d\n%s%s", code, out, errOut)
	}

	// A write the journal holds and no member does is lost: exit 1, naming the key.
	f, err := os.OpenFile(journal, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"key":"gone-1","sha256":"00","member":"m9","addr":"10.0.0.9:7000","at":"2026-01-01T00:00:00Z"}` + "\n")
	f.Close()
	code, out, errOut = run("check", "--members", addr, "--journal", journal)
	if code != 1 || !strings.Contains(out, "lost gone-1: missing; acknowledged by m9 (10.0.0.9:7000) at 2026-01-01T00:00:00Z") ||
		!strings.Contains(errOut, "1 of ") {
		t.Fatalf("check with a lost write: %d\n%s%s", code, out, errOut)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"write", "--journal", "j"}, {"check", "--members", "a:1"}, {"frobnicate"}, {"write", "--members", "a:1", "--journal", "j", "extra"}} {
		if code, _, errOut := run(args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
}
