package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/spf13/cobra"

	cove "github.com/covesandbox/cove/sdk/go"
)

// sandboxCmd groups the client verbs; they use the Go SDK, configured by
// COVE_API_URL / COVE_API_KEY (or E2B_API_URL / E2B_API_KEY).
func sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sandbox",
		Aliases: []string{"sbx"},
		Short:   "Create, inspect, use and kill sandboxes on a Cove server",
		Long: `Create, inspect, use and kill sandboxes on a Cove server.

The server and key come from COVE_API_URL and COVE_API_KEY (or E2B_API_URL and
E2B_API_KEY); the URL defaults to http://127.0.0.1:3000.`,
	}
	cmd.AddCommand(sandboxCreateCmd(), sandboxListCmd(), sandboxInfoCmd(), sandboxLogsCmd(), sandboxEventsCmd(), sandboxKillCmd(), sandboxPauseCmd(), sandboxResumeCmd(), sandboxSnapshotCmd(), sandboxForkCmd(), sandboxRunCodeCmd(),
		sandboxExecCmd(), sandboxShellCmd(), sandboxCpCmd())
	return cmd
}

func newClient() (*cove.Client, error) {
	c, err := cove.NewClient()
	if err != nil {
		return nil, fmt.Errorf("no API key: set COVE_API_KEY (or E2B_API_KEY); `cove server` prints one on its first start")
	}
	return c, nil
}

// explain turns SDK errors into messages a person can act on.
func explain(c *cove.Client, err error, sandboxID string) error {
	var netErr *net.OpError
	var ae *cove.APIError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cove.ErrUnauthorized):
		return fmt.Errorf("the server refused the API key: set COVE_API_KEY to a key of the server at %s (%v)", c.APIURL(), err)
	case errors.As(err, &ae) && ae.Code == cove.CodeSandboxLost:
		return errors.New(ae.Message)
	case errors.Is(err, cove.ErrNotFound) && sandboxID != "":
		return fmt.Errorf("sandbox %s not found: it may have timed out or been killed (`cove sandbox list` shows the running ones)", sandboxID)
	case errors.As(err, &netErr):
		return fmt.Errorf("cannot reach the Cove API at %s: is `cove server` running there? Set COVE_API_URL otherwise (%v)", c.APIURL(), err)
	}
	return err
}

// explainPath is explain for a file operation in a live sandbox: a
// missing path is said as such, not as a missing sandbox.
func explainPath(c *cove.Client, err error, sandboxID, p string) error {
	if errors.Is(err, cove.ErrNotFound) {
		if _, ierr := c.Info(context.Background(), sandboxID); ierr == nil {
			return fmt.Errorf("%s:%s: no such file or directory", sandboxID, p)
		}
	}
	return explain(c, err, sandboxID)
}

// keyValues parses repeated k=v flags.
func keyValues(pairs []string, what string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want key=value", what, p)
		}
		out[k] = v
	}
	return out, nil
}

// printJSON writes v as indented JSON (the --json output of list and info).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
