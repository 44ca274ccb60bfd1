package main

// commit is the revision the binary was built from, set at build time with
// -ldflags "-X main.commit=..." (make build and make release do); empty falls back to what the Go
// toolchain recorded.
var commit = ""
