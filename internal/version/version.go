// Package version holds Cove's build version, set by the linker:
// -ldflags "-X github.com/covesandbox/cove/internal/version.Version=v0.1.0".
package version

// Version is Cove's version.
var Version = "dev"
