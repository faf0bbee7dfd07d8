// Package sudo is Cove's sudo: passwordless, as E2B's sandboxes have it,
// without setuid. Every sandbox process runs with no_new_privs (a setuid
// sudo cannot gain anything), so `sudo` on a sandbox's PATH is the sandbox
// binary, which asks the agent — the sandbox's root, which runs what the
// API's root user runs — over a socket to start the command. The agent
// checks who asks (the socket's peer credentials) and gives nothing the
// API's root does not have.
package sudo

import "path/filepath"

// SocketName is the agent's socket, abstract (no file a process could
// replace), in the sandbox's network namespace.
const SocketName = "@cove-sudo"

// BinDir holds the sandbox's own commands (sudo, and python where the
// template has only python3): links to the sandbox binary the agent makes
// at start, first on every process's PATH.
const BinDir = "/.cove/bin"

// Binary is where the sandbox binary is in every sandbox (the isolation
// drivers' AgentPath): sudo in BinDir links to it.
const Binary = "/.cove/cove-envd"

// IsSudo reports whether a process started as argv0 is the sudo command.
func IsSudo(argv0 string) bool { return filepath.Base(argv0) == "sudo" }

// Request is the client's one request: the command and how to run it. The
// client's stdin, stdout and stderr come with it (SCM_RIGHTS) unless PTY
// is set, in which case the agent answers with a terminal's master.
type Request struct {
	Argv    []string          `json:"argv,omitempty"`
	User    string            `json:"user,omitempty"` // default root
	Env     []string          `json:"env,omitempty"`  // the caller's
	Set     map[string]string `json:"set,omitempty"`  // VAR=value before the command
	KeepEnv bool              `json:"keepEnv,omitempty"`
	Login   bool              `json:"login,omitempty"` // -i
	Shell   bool              `json:"shell,omitempty"` // -s
	Cwd     string            `json:"cwd,omitempty"`
	PTY     *Size             `json:"pty,omitempty"`
}

// Size is a terminal's size.
type Size struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// Message is what follows on the socket: the agent's started, exit and
// error; the client's signals.
type Message struct {
	Started int    `json:"started,omitempty"`
	Exit    *int   `json:"exit,omitempty"`
	Error   string `json:"error,omitempty"`
	Signal  int    `json:"signal,omitempty"`
}
