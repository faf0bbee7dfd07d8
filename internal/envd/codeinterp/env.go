package codeinterp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sort"
	"strings"
)

// sandboxEnv asks the agent for the sandbox's environment with the
// request's access token: the agent checks it, so this server runs code
// only for those the agent would. The status is the one to answer with.
func (s *Server) sandboxEnv(ctx context.Context, token string) (map[string]string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.Agent+"/envs", nil)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	resp, err := s.agent.Do(req)
	if err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("the sandbox's agent: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, http.StatusUnauthorized, fmt.Errorf("the sandbox's access token (X-Access-Token) is missing or wrong")
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, http.StatusBadGateway, fmt.Errorf("the sandbox's agent answered %s: %s", resp.Status, b)
	}
	env := map[string]string{}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&env); err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("the sandbox's environment: %w", err)
	}
	return env, http.StatusOK, nil
}

// prepareEnv sets the sandbox's environment in c's kernel where it changed
// since last time, then the request's variables.
func (s *Server) prepareEnv(c *codeContext, k kernel, sandbox, request map[string]string) error {
	set := map[string]string{}
	var unset []string
	c.mu.Lock()
	last := c.sandboxEnv
	c.mu.Unlock()
	if last == nil {
		// The kernel's first execution: it has the environment it started
		// with, the server's own (which the agent gave it, as it gives
		// every process the sandbox's variables). Only what differs from
		// that is set, so that a sandbox whose variables did not change
		// since (a warm one, handed out) costs its first run no cell more;
		// but Java's kernel gets them all, which it keeps as system
		// properties too (System.getProperty), as E2B's does.
		last = map[string]string{}
		for key := range sandbox {
			if v, ok := lookupEnv(s.cfg.Env, key); ok && c.Language != "java" {
				last[key] = v
			}
		}
	}
	for key, v := range sandbox {
		if !validEnvName(key) { // not settable in every language's environment
			continue
		}
		if old, ok := last[key]; !ok || old != v {
			set[key] = v
		}
	}
	for key := range last {
		if _, ok := sandbox[key]; !ok {
			unset = append(unset, key)
		}
	}
	maps.Copy(set, request)
	if len(set) > 0 || len(unset) > 0 {
		if err := k.setEnv(set, unset); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.sandboxEnv = sandbox
	c.mu.Unlock()
	return nil
}

// restoreEnv undoes the request's variables: each gets the value the
// sandbox or the kernel's start gave it, or goes.
func (s *Server) restoreEnv(c *codeContext, k kernel, sandbox, request map[string]string) error {
	if len(request) == 0 {
		return nil
	}
	set := map[string]string{}
	var unset []string
	for key := range request {
		if v, ok := sandbox[key]; ok {
			set[key] = v
		} else if v, ok := lookupEnv(s.cfg.Env, key); ok {
			set[key] = v
		} else {
			unset = append(unset, key)
		}
	}
	return k.setEnv(set, unset)
}

func lookupEnv(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// envCode is the code that sets and unsets variables in lang.
func envCode(lang string, set map[string]string, unset []string) string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sort.Strings(unset)
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b strings.Builder
	switch lang {
	case "python":
		b.WriteString("import os as __cove_os\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "__cove_os.environ[%s] = %s\n", q(k), q(set[k]))
		}
		for _, k := range unset {
			fmt.Fprintf(&b, "__cove_os.environ.pop(%s, None)\n", q(k))
		}
		b.WriteString("del __cove_os\n")
	case "r":
		for _, k := range keys {
			fmt.Fprintf(&b, "do.call(Sys.setenv, setNames(list(%s), %s))\n", q(set[k]), q(k))
		}
		for _, k := range unset {
			fmt.Fprintf(&b, "Sys.unsetenv(%s)\n", q(k))
		}
		b.WriteString("invisible(NULL)\n")
	case "bash":
		for _, k := range keys {
			fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(set[k]))
		}
		for _, k := range unset {
			fmt.Fprintf(&b, "unset %s\n", k)
		}
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// validEnvName reports whether name can be set in every language's
// environment (bash's rules, the strictest).
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		if r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return false
	}
	return true
}
