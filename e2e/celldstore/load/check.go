package load

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// CheckConfig is what to judge.
type CheckConfig struct {
	Journal string
	// Members are client addresses, host:port; a host name stands for every address it resolves to.
	Members []string
	// Settle is how long to keep reading the members while writes look lost: members that are
	// still copying hold a key a moment later. A lost write stays lost, so waiting hides nothing.
	Settle time.Duration
}

// Loss is an acknowledged write no member holds with the content written.
type Loss struct {
	Record
	// Reason is "missing" (no member holds the key) or "content differs".
	Reason string
}

// Report is a check's result.
type Report struct {
	// Checked is the number of acknowledged writes judged.
	Checked int
	Lost    []Loss
	// Keys is how many keys each member read holds, by address.
	Keys map[string]int
	// Unreachable members could not be read; a write only they hold counts as lost.
	Unreachable []string
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "checked %d acknowledged writes against %d members: %d lost\n", r.Checked, len(r.Keys), len(r.Lost))
	for _, u := range r.Unreachable {
		fmt.Fprintf(&b, "unreachable member %s\n", u)
	}
	for _, l := range r.Lost {
		fmt.Fprintf(&b, "lost %s: %s; acknowledged by %s (%s) at %s\n", l.Key, l.Reason, l.Member, l.Addr, l.At.Format(time.RFC3339Nano))
	}
	return b.String()
}

// Check reads the journal and every member's keys and reports the acknowledged writes lost.
func Check(ctx context.Context, cfg CheckConfig) (Report, error) {
	records, err := ReadJournal(cfg.Journal)
	if err != nil {
		return Report{}, err
	}
	return CheckRecords(ctx, records, cfg.Members, cfg.Settle)
}

// CheckRecords judges records against the members.
func CheckRecords(ctx context.Context, records []Record, members []string, settle time.Duration) (Report, error) {
	latest := map[string]Record{} // a key written twice must hold the last content acknowledged
	for _, r := range records {
		if old, ok := latest[r.Key]; !ok || !r.At.Before(old.At) {
			latest[r.Key] = r
		}
	}
	deadline := time.Now().Add(settle)
	for {
		rep, err := judge(ctx, latest, resolve(ctx, members))
		if err != nil || len(rep.Lost) == 0 || time.Now().After(deadline) {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func judge(ctx context.Context, latest map[string]Record, addrs []string) (Report, error) {
	rep := Report{Checked: len(latest), Keys: map[string]int{}}
	listings := make([]map[string]string, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { listings[i], errs[i] = listKeys(ctx, a) })
	}
	wg.Wait()
	held := map[string]map[string]bool{} // key -> hashes held
	for i, l := range listings {
		if errs[i] != nil {
			rep.Unreachable = append(rep.Unreachable, fmt.Sprintf("%s (%v)", addrs[i], errs[i]))
			continue
		}
		rep.Keys[addrs[i]] = len(l)
		for k, h := range l {
			if held[k] == nil {
				held[k] = map[string]bool{}
			}
			held[k][h] = true
		}
	}
	if len(rep.Keys) == 0 {
		return rep, fmt.Errorf("no member could be read: %s", strings.Join(rep.Unreachable, "; "))
	}
	for _, r := range latest {
		switch {
		case held[r.Key] == nil:
			rep.Lost = append(rep.Lost, Loss{r, "missing"})
		case !held[r.Key][r.SHA256]:
			rep.Lost = append(rep.Lost, Loss{r, "content differs"})
		}
	}
	sort.Slice(rep.Lost, func(i, j int) bool { return rep.Lost[i].At.Before(rep.Lost[j].At) })
	return rep, nil
}

func listKeys(ctx context.Context, addr string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/keys", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var l struct {
		Keys map[string]string `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, err
	}
	return l.Keys, nil
}
