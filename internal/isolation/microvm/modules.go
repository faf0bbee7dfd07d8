package microvm

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// module is a kernel module file and the modules it needs first.
type module struct {
	Path    string
	Depends []string
}

// modules reads every module under a kernel's modules directory: its
// name and what it depends on, from the .modinfo section that depmod
// reads (Debian's package ships no modules.dep: depmod makes it when the
// package is installed, and the guest's kernel is only unpacked).
func modules(dir string) (map[string]module, error) {
	out := map[string]module{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return err
		}
		info, err := modinfo(p)
		if err != nil {
			return fmt.Errorf("module %s: %w", p, err)
		}
		name := info["name"]
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(p), ".ko")
		}
		m := module{Path: p}
		if deps := info["depends"]; deps != "" {
			m.Depends = strings.Split(deps, ",")
		}
		out[name] = m
		return nil
	})
	return out, err
}

// modinfo reads a module's key=value pairs.
func modinfo(path string) (map[string]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("no .modinfo section")
	}
	data, err := sec.Data()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			if _, seen := out[k]; !seen {
				out[k] = v
			}
		}
	}
	return out, nil
}

// loadOrder returns the files of the named modules and of every module
// they depend on, each after what it needs.
func loadOrder(all map[string]module, names ...string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1: being visited, 2: done
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("modules depend on each other in a cycle through %s", name)
		case 2:
			return nil
		}
		m, ok := all[name]
		if !ok {
			return fmt.Errorf("no kernel module %s", name)
		}
		state[name] = 1
		for _, d := range m.Depends {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, m.Path)
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}
