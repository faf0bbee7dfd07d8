package codeinterp

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// assets are the files Cove's own kernels run from (and the Python
// kernel's setup), written to a private directory when the server starts.
//
//go:embed assets
var assets embed.FS

func writeAssets() (string, error) {
	dir, err := os.MkdirTemp("", "cove-code-interpreter-")
	if err != nil {
		return "", err
	}
	err = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644)
	})
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write the kernels' files: %w", err)
	}
	return dir, nil
}

// startKernel starts a kernel for lang in cwd, set up and ready to run code.
func (s *Server) startKernel(ctx context.Context, lang, cwd string) (kernel, error) {
	switch lang {
	case "python":
		k, err := startZMQKernel(ctx, "python3", lang, cwd, s.cfg.Env)
		if err != nil {
			return nil, err
		}
		setup, err := os.ReadFile(filepath.Join(s.assets, "python_setup.py"))
		if err == nil {
			err = runSilent(k, string(setup), runOpts{})
		}
		if err != nil {
			k.close()
			return nil, fmt.Errorf("set up the python kernel: %w", err)
		}
		return k, nil
	case "r":
		return startZMQKernel(ctx, "ir", lang, cwd, s.cfg.Env)
	case "java":
		// JShell in the kernel's own JVM; --add-opens lets it change the
		// environment System.getenv reads.
		return startPipeKernel(ctx, []string{"java", "--add-opens", "java.base/java.util=ALL-UNNAMED",
			"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", filepath.Join(s.assets, "CoveJavaKernel.java")}, cwd, s.cfg.Env)
	case "bash":
		return startBashKernel(ctx, cwd, s.cfg.Env)
	case "javascript", "typescript":
		env := s.cfg.Env
		if _, ok := lookupEnv(env, "NODE_PATH"); !ok {
			// Where Debian and npm put global modules (typescript among them).
			env = append(slices.Clip(env), "NODE_PATH=/usr/local/lib/node_modules:/usr/share/nodejs:/usr/lib/nodejs")
		}
		return startPipeKernel(ctx, []string{"node", filepath.Join(s.assets, "node_kernel.js")}, cwd, env)
	}
	return nil, fmt.Errorf("no kernel for %s yet", lang)
}

// runSilent runs code in k without publishing anything and waits for it;
// an exception in it is the error.
func runSilent(k kernel, code string, opts runOpts) error {
	opts.silent = true
	r, err := k.start(code, opts)
	if err != nil {
		return err
	}
	for range r.msgs {
	}
	if r.err != nil {
		return r.err
	}
	var rep executeReply
	if err := json.Unmarshal(r.reply, &rep); err != nil {
		return fmt.Errorf("execute_reply: %w", err)
	}
	if rep.Status == "error" {
		return fmt.Errorf("%s: %s", rep.EName, rep.EValue)
	}
	return nil
}
