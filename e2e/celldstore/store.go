package celldstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// validKey keeps keys usable as file names as they are, so the store needs no escaping and a
// key can never name a temporary file (those start with a dot).
var validKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// ValidKey tells whether key is one the store accepts.
func ValidKey(key string) bool { return validKey.MatchString(key) }

// Hash is how listings name a value's content: the hex SHA-256 of its bytes.
func Hash(value []byte) string {
	s := sha256.Sum256(value)
	return hex.EncodeToString(s[:])
}

// identity is written once, when a directory is first used. The incarnation tells peers whether
// the disk behind a member name is still the one whose keys they counted; the fleet UID keeps a
// disk from being served by another fleet.
type identity struct {
	Incarnation string `json:"incarnation"`
	FleetUID    string `json:"fleetUID,omitempty"`
}

// Store is one member's keys, one file per key. Put returns only once the file and the
// directory entry are on disk, so a key it acknowledged survives a crash of the process or the
// machine.
type Store struct {
	dir         string
	incarnation string

	mu     sync.Mutex
	hashes map[string]string
	order  []string // keys in the order this process learned them: the peers' listing cursor
}

// OpenStore opens (creating if need be) the store in dir. A directory first used by another
// fleet is refused.
func OpenStore(dir, fleetUID string) (*Store, error) {
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keys, 0o750); err != nil {
		return nil, err
	}
	id, err := loadIdentity(dir, fleetUID)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: keys, incarnation: id.Incarnation, hashes: map[string]string{}}
	entries, err := os.ReadDir(keys)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			_ = os.Remove(filepath.Join(keys, name)) // a write that never finished, never acknowledged
			continue
		}
		b, err := os.ReadFile(filepath.Join(keys, name))
		if err != nil {
			return nil, err
		}
		s.hashes[name] = Hash(b)
		s.order = append(s.order, name)
	}
	return s, nil
}

func loadIdentity(dir, fleetUID string) (identity, error) {
	path := filepath.Join(dir, "identity.json")
	var id identity
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &id); err != nil || id.Incarnation == "" {
			return id, fmt.Errorf("%s: unreadable identity: %v", path, err)
		}
		if fleetUID != "" && id.FleetUID != "" && id.FleetUID != fleetUID {
			return id, fmt.Errorf("%s belongs to fleet UID %s, not %s", dir, id.FleetUID, fleetUID)
		}
		return id, nil
	case errors.Is(err, os.ErrNotExist):
		id = identity{Incarnation: randomID(), FleetUID: fleetUID}
		b, _ := json.Marshal(id)
		return id, writeDurably(dir, "identity.json", b)
	default:
		return id, err
	}
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeDurably replaces dir/name with b: a temporary file, fsync, rename, fsync of the directory.
func writeDurably(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Incarnation names this directory's contents; it changes only with a new, empty directory.
func (s *Store) Incarnation() string { return s.incarnation }

// Put stores value under key durably.
func (s *Store) Put(key string, value []byte) error {
	if !ValidKey(key) {
		return fmt.Errorf("invalid key %q", key)
	}
	if err := writeDurably(s.dir, key, value); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.hashes[key]; !ok {
		s.order = append(s.order, key)
	}
	s.hashes[key] = Hash(value)
	return nil
}

// Get returns the value of key, or ok false.
func (s *Store) Get(key string) (value []byte, ok bool, err error) {
	if !s.Has(key) {
		return nil, false, nil
	}
	b, err := os.ReadFile(filepath.Join(s.dir, key))
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// Has tells whether the store holds key.
func (s *Store) Has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.hashes[key]
	return ok
}

// Hashes returns every key with its value's hash.
func (s *Store) Hashes() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.hashes))
	for k, h := range s.hashes {
		out[k] = h
	}
	return out
}

// Since returns the keys learned after the first since ones, and the cursor to ask from next.
func (s *Store) Since(since int) (keys []string, next int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if since < 0 || since > len(s.order) {
		since = 0
	}
	return append([]string(nil), s.order[since:]...), len(s.order)
}

// Len is the number of keys held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hashes)
}
