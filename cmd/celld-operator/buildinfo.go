package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time with -ldflags "-X main.version=... -X main.commit=... -X main.date=..."
// (make build and make release do). An empty commit falls back to what the Go toolchain recorded
// from version control (go build in a checkout records the revision and its time).
var (
	// version is the release, or what git describe says of the checkout.
	version = "dev"
	// commit is the revision the binary was built from.
	commit = ""
	// date is when the binary was built, RFC 3339 in UTC.
	date = ""
)

// build is what `celld-operator version` prints.
type build struct {
	version, commit, date, goVersion string
	// fromVCS: commit and date came from the toolchain's record, and date is the commit's time.
	fromVCS bool
}

func readBuild() build {
	var settings []debug.BuildSetting
	if bi, ok := debug.ReadBuildInfo(); ok {
		settings = bi.Settings
	}
	return resolveBuild(version, commit, date, runtime.Version(), settings)
}

// resolveBuild fills an empty commit (and then an empty date) from the toolchain's vcs.revision,
// vcs.modified and vcs.time.
func resolveBuild(version, commit, date, goVersion string, settings []debug.BuildSetting) build {
	b := build{version: version, commit: commit, date: date, goVersion: goVersion}
	if b.commit == "" {
		vcs := map[string]string{}
		for _, s := range settings {
			vcs[s.Key] = s.Value
		}
		if rev := vcs["vcs.revision"]; rev != "" {
			b.commit, b.fromVCS = rev, true
			if vcs["vcs.modified"] == "true" {
				b.commit += " (modified)"
			}
			if b.date == "" && vcs["vcs.time"] != "" {
				b.date = vcs["vcs.time"] + " (commit time)"
			}
		}
	}
	for _, s := range []*string{&b.version, &b.commit, &b.date} {
		if *s == "" {
			*s = "unknown"
		}
	}
	return b
}

func (b build) String() string {
	return fmt.Sprintf("version: %s\ncommit:  %s\ndate:    %s\ngo:      %s\n", b.version, b.commit, b.date, b.goVersion)
}
