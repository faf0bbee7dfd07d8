package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ReadKeyFile reads a key file readable by its owner only (a file others
// may read is refused). A missing file, when fresh is given, is created
// with what fresh returns: exclusively, 0600, synced.
func ReadKeyFile(path string, fresh func() ([]byte, error)) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && fresh != nil {
		if raw, err = fresh(); err == nil {
			err = writeNew(path, raw)
		}
	}
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: other users may read it (mode %04o): make it 0600 or 0400", path, fi.Mode().Perm())
	}
	return raw, nil
}

func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
