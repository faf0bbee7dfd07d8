package isolation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/covesandbox/cove/internal/errs"
)

// WriteIdentity writes a sandbox's /etc/hostname, /etc/hosts and (with
// resolvers) /etc/resolv.conf into its root file system at root, before
// the sandbox runs anything.
//
// The root holds template layers, and a template's files are whatever its
// author made them: all access goes through os.Root, so no symlink leads
// out of the root (an /etc that points to a host directory fails the
// create), and a symlink at one of these names is replaced, not followed.
func WriteIdentity(root, id string, dns []string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := LinkLeadsOut(r, "etc"); err != nil {
		return err
	}
	if err := r.MkdirAll("etc", 0o755); err != nil { // an image may have none
		return fmt.Errorf("the root's /etc: %w", err)
	}
	write := func(name, content string) error {
		if st, err := r.Lstat(name); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if err := r.Remove(name); err != nil {
				return fmt.Errorf("replace the link /%s: %w", name, err)
			}
		}
		if err := r.WriteFile(name, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write /%s: %w", name, err)
		}
		return nil
	}
	if len(dns) > 0 {
		var b strings.Builder
		for _, d := range dns {
			b.WriteString("nameserver " + d + "\n")
		}
		if err := write("etc/resolv.conf", b.String()); err != nil {
			return err
		}
	}
	if err := write("etc/hostname", id+"\n"); err != nil {
		return err
	}
	return write("etc/hosts", strings.Join([]string{
		"127.0.0.1\tlocalhost " + id,
		"::1\tlocalhost ip6-localhost ip6-loopback",
		"",
	}, "\n"))
}

// LinkLeadsOut returns an invalid-argument error naming the link when name,
// in the root a template's layers make, is a symlink that leads out of it
// (the template's fault, not the host's).
func LinkLeadsOut(r *os.Root, name string) error {
	st, err := r.Lstat(name)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	if _, err := r.Stat(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		target, _ := r.Readlink(name)
		return errs.New(errs.InvalidArgument, "the template's /%s is a link to %s, which leads out of its root", name, target)
	}
	return nil
}
