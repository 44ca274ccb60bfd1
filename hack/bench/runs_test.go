package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func runsBlock(body string) string {
	return "<!-- bench:runs -->\n" + body + "<!-- /bench:runs -->\n"
}

// addRun is what a run does to the file: its mode's part, then its row in the runs part.
func addRun(doc, part, body, row string) string {
	doc = mergePart(doc, part, body)
	return mergePart(doc, runsPart, runsBody(doc, row))
}

// TestRunsPartKeepsEveryRun: each run adds its row after the rows of the runs before it, whatever
// its mode, the latest keptRuns are kept, and the modes' own parts are left as they were.
func TestRunsPartKeepsEveryRun(t *testing.T) {
	row := func(i int) string {
		return fmt.Sprintf("| run %d | c | quick | 50 | 100 | 1 ms | 2 ms | 3 ms | p99 ≤ 1.00 s | met | a \\| b |", i)
	}
	doc := addRun("", quickPart, quickV1, row(0))
	if want := quickBlock(quickV1) + "\n" + runsBlock(runsBody("", row(0))); doc != want {
		t.Fatalf("the first run:\n%s\nwant\n%s", doc, want)
	}
	doc = addRun(doc, longPart, longV1, row(1))
	doc = addRun(doc, quickPart, quickV2, row(2))
	if got := runRows(doc); strings.Join(got, "\n") != strings.Join([]string{row(0), row(1), row(2)}, "\n") {
		t.Fatalf("rows after three runs, oldest first:\n%s", strings.Join(got, "\n"))
	}
	q, _, _ := findPart(doc, quickPart)
	r, _, _ := findPart(doc, runsPart)
	l, _, ok := findPart(doc, longPart)
	if !ok || !(q < r && r < l) {
		t.Fatalf("the parts are not quick, runs, long in that order (%d, %d, %d):\n%s", q, r, l, doc)
	}
	if !strings.Contains(doc, quickBlock(quickV2)) || !strings.Contains(doc, longBlock(longV1)) {
		t.Fatalf("a run changed a part not its own:\n%s", doc)
	}

	for i := 3; i < keptRuns+5; i++ {
		doc = addRun(doc, quickPart, quickV1, row(i))
	}
	got := runRows(doc)
	if len(got) != keptRuns {
		t.Fatalf("kept %d rows, want %d:\n%s", len(got), keptRuns, strings.Join(got, "\n"))
	}
	for i, r := range got {
		if want := row(i + 5); r != want {
			t.Errorf("row %d = %s, want %s (the latest kept, oldest first)", i, r, want)
		}
	}
}

// TestRunRow: a run's row carries its step latencies, the verdict against its target and where
// the slowest steps' time went.
func TestRunRow(t *testing.T) {
	at := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	mk := func(fleets int, secs ...float64) *scaleInResult {
		s := &scaleInResult{fleets: fleets, steps: secs}
		for i, x := range secs {
			rolled := at.Add(time.Duration(i) * time.Second)
			s.traced = append(s.traced, stepBreakdown{
				stepSample: stepSample{fleet: fmt.Sprintf("f%d", i), replicas: 5, rolled: rolled, seen: rolled.Add(time.Duration(x * float64(time.Second)))},
				traced:     true, hasEvent: true, queue: x * 0.75, fresh: x * 0.25,
			})
		}
		return s
	}
	met := mk(50, 0.1, 0.2, 0.3).runRow(at, "abc1234", false)
	for _, want := range []string{"| 2026-12-04 06:00 | abc1234 | quick | 50 | 3 |", "p99 ≤ 1.00 s | met |", "the queue 75%", "fresh reads 25%"} {
		if !strings.Contains(met, want) {
			t.Errorf("row %s\nlacks %q", met, want)
		}
	}
	missed := mk(500, 0.5, 2, 4).runRow(at, "abc1234", true)
	for _, want := range []string{"| long | 500 |", "p99 ≤ 3.00 s | missed: p99 4.00 s |", "1 step of 4.00 s or more"} {
		if !strings.Contains(missed, want) {
			t.Errorf("row %s\nlacks %q", missed, want)
		}
	}
	if n := strings.Count(missed, " | "); n != strings.Count(runsHead, " | ") {
		t.Errorf("row has %d cell borders, the head %d: %s", n, strings.Count(runsHead, " | "), missed)
	}
	if got := (&scaleInResult{fleets: 50, steps: []float64{0.1}}).runRow(at, "c", false); !strings.HasSuffix(got, "| no step traced |") {
		t.Errorf("a run with no traced step: %s", got)
	}
}
