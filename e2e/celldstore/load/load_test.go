package load

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeMember is a member as the load sees it: PUT acknowledges and keeps, GET /v1/keys lists.
type fakeMember struct {
	name   string
	mu     sync.Mutex
	keys   map[string]string
	refuse bool
}

func (m *fakeMember) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.Header().Set("X-Celld-Member", m.name)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/keys":
		_ = json.NewEncoder(w).Encode(map[string]any{"member": m.name, "keys": m.keys})
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/keys/"):
		if m.refuse {
			http.Error(w, "not stored durably", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		m.keys[strings.TrimPrefix(r.URL.Path, "/v1/keys/")] = hash(b)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func serve(t *testing.T, m *fakeMember) string {
	s := httptest.NewServer(m)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func TestWriteJournalsAcknowledgedWritesOnly(t *testing.T) {
	a := &fakeMember{name: "a", keys: map[string]string{}}
	b := &fakeMember{name: "b", keys: map[string]string{}, refuse: true}
	journal := filepath.Join(t.TempDir(), "j")
	ctx, cancel := context.WithCancel(context.Background())
	acked := 0
	stats, err := Write(ctx, WriteConfig{Members: []string{serve(t, a), serve(t, b)}, Journal: journal, Workers: 1, OnAck: func(Record) {
		if acked++; acked == 20 {
			cancel()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != stats.Acked || stats.Acked < 20 || stats.Failed == 0 || stats.ByMember["a"] != stats.Acked {
		t.Fatalf("stats %+v, %d records", stats, len(recs))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.Key] {
			t.Errorf("key %s written twice", r.Key)
		}
		seen[r.Key] = true
		if r.Member != "a" || r.SHA256 != hash(Value(r.Key)) || r.At.IsZero() || a.keys[r.Key] != r.SHA256 {
			t.Errorf("record %+v does not match what a holds (%s)", r, a.keys[r.Key])
		}
	}
	if !strings.Contains(stats.LastError, "503") {
		t.Errorf("last refusal %q does not say why", stats.LastError)
	}
}

func TestCheckFindsMissingAndAlteredWrites(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(key, member string) Record {
		return Record{Key: key, SHA256: hash(Value(key)), Member: member, Addr: member + ":7000", At: at}
	}
	a := &fakeMember{name: "a", keys: map[string]string{"k1": hash(Value("k1")), "k3": hash([]byte("other"))}}
	b := &fakeMember{name: "b", keys: map[string]string{"k2": hash(Value("k2")), "k3": hash([]byte("else"))}}
	records := []Record{rec("k1", "a"), rec("k2", "a"), rec("k3", "b"), rec("k4", "b")}
	rep, err := CheckRecords(context.Background(), records, []string{serve(t, a), serve(t, b)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != 4 || len(rep.Lost) != 2 {
		t.Fatalf("report: %+v", rep)
	}
	got := map[string]string{}
	for _, l := range rep.Lost {
		got[l.Key] = l.Reason + " " + l.Member
	}
	if got["k3"] != "content differs b" || got["k4"] != "missing b" {
		t.Errorf("lost: %v", got)
	}
	if s := rep.String(); !strings.Contains(s, "checked 4 acknowledged writes against 2 members: 2 lost") ||
		!strings.Contains(s, "lost k4: missing; acknowledged by b (b:7000) at 2026-01-02T03:04:05Z") {
		t.Errorf("report text:\n%s", s)
	}

	// A member that cannot be read is named, and what only it holds counts as lost.
	rep, err = CheckRecords(context.Background(), records[:2], []string{serve(t, a), "127.0.0.1:1"}, 0)
	if err != nil || len(rep.Unreachable) != 1 || len(rep.Lost) != 1 || rep.Lost[0].Key != "k2" {
		t.Errorf("with b unreachable: %+v %v", rep, err)
	}
	if _, err := CheckRecords(context.Background(), records, []string{"127.0.0.1:1"}, 0); err == nil {
		t.Error("a check that read no member succeeded")
	}
}

func TestCheckWaitsForAMemberStillCopying(t *testing.T) {
	m := &fakeMember{name: "a", keys: map[string]string{}}
	addr := serve(t, m)
	go func() {
		time.Sleep(300 * time.Millisecond)
		m.mu.Lock()
		m.keys["k"] = hash(Value("k"))
		m.mu.Unlock()
	}()
	rep, err := CheckRecords(context.Background(), []Record{{Key: "k", SHA256: hash(Value("k"))}}, []string{addr}, 5*time.Second)
	if err != nil || len(rep.Lost) != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestReadJournalSkipsOnlyACutLastLine(t *testing.T) {
	dir := t.TempDir()
	good := `{"key":"a","sha256":"x","member":"m","addr":"h:1","at":"2026-01-01T00:00:00Z"}` + "\n"
	cut := filepath.Join(dir, "cut")
	if err := os.WriteFile(cut, []byte(good+`{"key":"b","sha2`), 0o600); err != nil {
		t.Fatal(err)
	}
	if rs, err := ReadJournal(cut); err != nil || len(rs) != 1 || rs[0].Key != "a" {
		t.Errorf("cut journal: %v %v", rs, err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte(`{"key":"b","sha2`+"\n"+good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJournal(bad); err == nil {
		t.Error("a damaged line inside the journal was skipped")
	}
}
