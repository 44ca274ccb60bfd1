// Package load writes to a celld fleet, keeping a journal of every acknowledged write, and
// checks a fleet against such a journal: an acknowledged write no member holds, or holds with
// other content, is lost.
package load

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Record is one acknowledged write.
type Record struct {
	Key string `json:"key"`
	// SHA256 is the hex SHA-256 of the value written, what a member's listing reports.
	SHA256 string `json:"sha256"`
	// Member is the member that acknowledged the write (its name, as it answered), Addr where it
	// was reached.
	Member string    `json:"member"`
	Addr   string    `json:"addr"`
	At     time.Time `json:"at"`
}

// Value is what the writer stores under key: the key and its hash, so a value read on its own
// tells what it should be.
func Value(key string) []byte {
	s := sha256.Sum256([]byte(key))
	return []byte("celld-load " + key + " " + hex.EncodeToString(s[:]) + "\n")
}

func hash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// journal appends records, each on disk before Append returns: a write is counted as
// acknowledged only once the journal could not lose it.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &journal{f: f}, nil
}

func (j *journal) Append(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return j.f.Sync()
}

func (j *journal) Close() error { return j.f.Close() }

// ReadJournal returns the records of a journal. A last line cut short (the writer killed while
// writing it) is not a record; any other unreadable line is an error.
func ReadJournal(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && bytes.HasSuffix(b, sc.Bytes()) {
				break
			}
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
