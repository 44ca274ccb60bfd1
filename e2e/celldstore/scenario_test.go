package celldstore

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld-operator/e2e/celldstore/bucketstore"
	"github.com/celld/celld-operator/e2e/celldstore/load"
)

// One member at a time, waiting for readiness in between, as a correct operator changes a fleet:
// every member replaced on an empty disk (a lost node), one added, one removed, while writes
// flow. No acknowledged write may be lost.
func TestOneMemberAtATimeLosesNothing(t *testing.T) {
	f := newTestFleet(t)
	all := names(4)
	// Copying is slow, as it is for a member with much data: the next step follows readiness at
	// once, so only readiness stands between it and a key's last copy.
	slow := func(c *Config) {
		c.beforePull = func(ctx context.Context) error {
			select {
			case <-time.After(100 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	for _, m := range all {
		f.start(m, f.dir(), slow)
	}
	f.waitReady(all...)
	w := startWriter(t, 150, f.clientAddrs(all...))
	w.waitAcked(t, 50)
	start := w.count()

	for i, m := range all {
		f.kill(m)
		rest := append(append([]string(nil), all[:i]...), all[i+1:]...)
		f.waitReady(rest...)
		f.start(m, f.dir(), slow)
		f.waitReady(all...)
	}
	f.start("m4", f.dir(), slow)
	f.waitReady(append(all, "m4")...)
	f.remove("m0")
	members := []string{"m1", "m2", "m3", "m4"}
	f.waitReady(members...)
	f.kill("m1")
	f.waitReady("m2", "m3", "m4")
	f.start("m1", f.dir(), slow)
	w.waitAcked(t, 20)
	w.stop()
	if w.count()-start < 100 {
		t.Fatalf("%d writes acknowledged while members changed, want at least 100", w.count()-start)
	}
	if w.err != nil {
		t.Fatal(w.err)
	}

	rep, err := load.Check(context.Background(), load.CheckConfig{Journal: w.journal, Members: f.clientAddrs(members...)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked < 150 {
		t.Fatalf("checked %d acknowledged writes, want at least 150", rep.Checked)
	}
	if len(rep.Lost) > 0 {
		t.Fatalf("one member at a time lost writes:\n%s", rep)
	}
	for _, m := range members {
		if n := rep.Keys[f.clientAddrs(m)[0]]; n == 0 {
			t.Errorf("%s holds no key: the check would not notice its loss", m)
		}
	}
}

// Two members lost at once, both replaced on empty disks, is what the fleet does not survive:
// the checker must see the writes that only those two held.
func TestTwoMembersAtOnceLoseWritesAndTheCheckerSeesIt(t *testing.T) {
	f := newTestFleet(t)
	all := names(4)
	for _, m := range all {
		f.start(m, f.dir())
	}
	f.waitReady(all...)
	w := startWriter(t, 400, f.clientAddrs(all...))
	w.waitAcked(t, 300)

	// The keys only m0 and m1 hold, just before they go.
	onlyPair := map[string]bool{}
	for k := range keysOf(t, f.clientAddrs("m0")[0]) {
		onlyPair[k] = true
	}
	pair1 := keysOf(t, f.clientAddrs("m1")[0])
	for k := range onlyPair {
		if _, ok := pair1[k]; !ok {
			delete(onlyPair, k)
		}
	}
	for _, m := range all[2:] {
		for k := range keysOf(t, f.clientAddrs(m)[0]) {
			delete(onlyPair, k)
		}
	}
	if len(onlyPair) == 0 {
		t.Fatal("no key is held by m0 and m1 alone: the test proves nothing")
	}
	f.kill("m0", "m1")
	// A write both stored just before they went can reach its writer a moment after.
	safeAfter := time.Now().Add(200 * time.Millisecond)
	f.start("m0", f.dir())
	f.start("m1", f.dir())
	f.waitReady(all...)
	if time.Now().Before(safeAfter) {
		time.Sleep(time.Until(safeAfter))
	}
	w.waitAcked(t, 50)
	w.stop()

	rep, err := load.Check(context.Background(), load.CheckConfig{Journal: w.journal, Members: f.clientAddrs(all...)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) == 0 {
		t.Fatalf("two members lost at once, and the checker found no lost write (checked %d)", rep.Checked)
	}
	lost := map[string]bool{}
	for _, l := range rep.Lost {
		lost[l.Key] = true
		if l.Reason != "missing" || l.At.After(safeAfter) {
			t.Errorf("lost %s (%s) acknowledged at %s, well after the members were lost", l.Key, l.Reason, l.At)
		}
	}
	caught := 0
	for k := range onlyPair {
		if lost[k] {
			caught++
		}
	}
	if caught*2 < len(onlyPair) {
		t.Errorf("%d of the %d keys only m0 and m1 held reported lost; want most", caught, len(onlyPair))
	}
	t.Logf("checked %d, lost %d (%d held by the lost pair alone)", rep.Checked, len(rep.Lost), len(onlyPair))
}

// A member restarted on its own disk keeps its keys and is not ready until it has copied the
// keys it owns that were written while it was down.
func TestRestartedMemberIsReadyOnlyOnceCaughtUp(t *testing.T) {
	f := newTestFleet(t)
	all := names(3)
	dirs := map[string]string{}
	for _, m := range all {
		dirs[m] = f.dir()
		f.start(m, dirs[m])
	}
	f.waitReady(all...)
	w1 := startWriter(t, 400, f.clientAddrs(all...))
	w1.waitAcked(t, 100)
	w1.stop()
	before := keysOf(t, f.clientAddrs("m2")[0])
	w2 := startWriter(t, 400, f.clientAddrs(all...))
	f.kill("m2")
	f.waitReady("m0", "m1")
	w2.waitAcked(t, 150)
	w2.stop()

	// Copies fail until the gate opens: rounds go on, none complete.
	var gate atomic.Bool
	f.start("m2", dirs["m2"], func(c *Config) {
		c.beforePull = func(context.Context) error {
			if !gate.Load() {
				return errors.New("copies held by the test")
			}
			return nil
		}
	})
	m2 := f.clientAddrs("m2")[0]
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if code, why := readyz(m2); code != http.StatusServiceUnavailable || why != "catching up" {
			t.Fatalf("m2 answered /readyz %d %q while it could not copy", code, why)
		}
	}
	held := keysOf(t, m2)
	for k := range before {
		if _, ok := held[k]; !ok {
			t.Fatalf("m2 came back on its own disk without %s", k)
		}
	}
	if len(before) == 0 {
		t.Fatal("m2 held no key before it stopped")
	}
	gate.Store(true)
	f.waitReady("m2")

	held = keysOf(t, m2)
	union := map[string]bool{}
	for _, m := range all {
		for k := range keysOf(t, f.clientAddrs(m)[0]) {
			union[k] = true
		}
	}
	owned, missing, copied := 0, 0, 0
	for k := range union {
		if !owns("m2", k, all, Replicas) {
			continue
		}
		owned++
		if _, ok := held[k]; !ok {
			missing++
		} else if _, had := before[k]; !had {
			copied++
		}
	}
	if missing > 0 || copied == 0 {
		t.Fatalf("m2 ready holding %d keys: missing %d of the %d it owns, %d copied since it came back", len(held), missing, owned, copied)
	}
	for _, w := range []*writer{w1, w2} {
		rep, err := load.Check(context.Background(), load.CheckConfig{Journal: w.journal, Members: f.clientAddrs(all...)})
		if err != nil || len(rep.Lost) > 0 || rep.Checked < 100 {
			t.Fatalf("%v\n%s", err, rep)
		}
	}
}

// A member whose partner is gone and that cannot copy anywhere stays not ready, and refuses
// writes it cannot store twice.
func TestUnderReplicatedMemberIsNotReady(t *testing.T) {
	f := newTestFleet(t)
	f.start("m0", f.dir())
	f.start("m1", f.dir())
	f.waitReady("m0", "m1")
	put := func(addr, key string) int {
		req, _ := http.NewRequest(http.MethodPut, "http://"+addr+"/v1/keys/"+key, strings.NewReader("v"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Ready with no keys says nothing of whether m0 has met m1 yet.
	for deadline := time.Now().Add(5 * time.Second); put(f.clientAddrs("m0")[0], "k1") != http.StatusNoContent; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("PUT with two members refused for 5s")
		}
	}
	f.kill("m1")
	code, why := readyz(f.clientAddrs("m0")[0])
	if code != http.StatusServiceUnavailable || !strings.Contains(why, "1 keys on fewer than 2 live members") {
		t.Fatalf("m0 with its partner just lost: %d %q", code, why)
	}
	if code := put(f.clientAddrs("m0")[0], "k2"); code != http.StatusServiceUnavailable {
		t.Fatalf("PUT with one live member: %d, want 503", code)
	}
	// Alone in discovery (a fleet scaled to one), its single copies are all there can be.
	f.remove("m1")
	f.waitReady("m0")
}

// In bucket durability the bucket is the durable copy: every member lost at once loses nothing,
// and new members on empty disks are ready once they have copied the bucket.
func TestBucketDurabilitySurvivesLosingEveryMember(t *testing.T) {
	bucket := httptest.NewServer(bucketstore.Handler(t.TempDir()))
	defer bucket.Close()
	f := newTestFleet(t)
	f.bucket = bucket.URL
	all := names(2)
	for _, m := range all {
		f.start(m, f.dir())
	}
	f.waitReady(all...)
	w := startWriter(t, 400, f.clientAddrs(all...))
	w.waitAcked(t, 150)
	f.kill(all...)
	w.stop()
	for _, m := range all {
		f.start(m, f.dir())
	}
	f.waitReady(all...)
	rep, err := load.Check(context.Background(), load.CheckConfig{Journal: w.journal, Members: f.clientAddrs("m0")})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked < 150 || len(rep.Lost) > 0 {
		t.Fatalf("a new member, ready, checked alone:\n%s", rep)
	}

	other := newTestFleet(t)
	other.uid = "another-fleet"
	other.bucket = bucket.URL
	other.start("x0", other.dir())
	addr := other.clientAddrs("x0")[0]
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, why := readyz(addr)
		if code == http.StatusServiceUnavailable && strings.Contains(why, "another fleet") {
			break
		}
		if code == http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("a member of another fleet on this bucket: %d %q", code, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
