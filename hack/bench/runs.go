package main

import (
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// The step targets hold only if they hold in every run, so docs/benchmarks.md keeps a row per run
// of the scale-in walk, quick and long alike, in a part of its own that each run extends: a run's
// own part says only how that one went, and a target met once and missed the next time would
// otherwise leave no trace.

const (
	runsPart = "runs"
	// keptRuns is how many of the latest runs the part keeps.
	keptRuns = 12
	runsHead = "| when (UTC) | commit | mode | fleets | steps | p50 | p99 | max | target | verdict | the slowest 10% of the steps: where their time went |"
	runsRule = "|---|---|---|---|---|---|---|---|---|---|---|"
)

// runRow is the walk's line in the runs part: its step latencies against the target and the
// breakdown of its slowest steps.
func (s *scaleInResult) runRow(started time.Time, commit string, long bool) string {
	mode := "quick"
	if long {
		mode = "long"
	}
	p99 := percentile(s.steps, 0.99)
	target, verdict := stepTarget(s.fleets, p99)
	slow := "no step traced"
	if len(s.traced) > 0 {
		sl := slowest(s.traced, 0.9)
		slow = fmt.Sprintf("%s of %s or more: %s", steps(len(sl)), durStr(sl[len(sl)-1].seconds()), shares(sl))
	}
	cells := []string{started.UTC().Format("2006-01-02 15:04"), commit, mode, fmt.Sprint(s.fleets), fmt.Sprint(len(s.steps)),
		durStr(percentile(s.steps, 0.5)), durStr(p99), durStr(maxOf(s.steps)), target, verdict, slow}
	for i := range cells {
		cells[i] = esc(cells[i])
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// runRows are the table rows of the runs part in doc, oldest first; none when it has no such part.
func runRows(doc string) []string {
	from, to, ok := findPart(doc, runsPart)
	if !ok {
		return nil
	}
	var rows []string
	for _, l := range strings.Split(doc[from:to], "\n") {
		if strings.HasPrefix(l, "| ") && l != runsHead {
			rows = append(rows, l)
		}
	}
	return rows
}

// runsBody is the runs part with row added after the rows doc already holds, the latest keptRuns.
func runsBody(doc, row string) string {
	rows := append(runRows(doc), row)
	if len(rows) > keptRuns {
		rows = rows[len(rows)-keptRuns:]
	}
	var b strings.Builder
	b.WriteString("## The step targets, run by run\n\n")
	fmt.Fprintf(&b, "Every run of the scale-in walk adds a row here, quick (`make bench`) and long (`BENCH_FLEETS=500 make bench`) "+
		"alike; the latest %d are kept. A step is a fleet's StatefulSet rolled out at one size until the operator's write of "+
		"the next, as the bench's watches see it; its parts come from the operator's log line of that write. Do not edit: "+
		"each run adds its row and keeps the others.\n\n", keptRuns)
	b.WriteString(runsHead + "\n" + runsRule + "\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	return b.String()
}

// gitCommit is the short commit of the tree the bench ran on, "+changes" when the tree differs
// from it; "unknown" outside a git checkout.
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if err := exec.Command("git", "-C", root, "diff", "--quiet", "HEAD", "--", ".", ":!docs/benchmarks.md").Run(); err != nil {
		c += "+changes"
	}
	return c
}
