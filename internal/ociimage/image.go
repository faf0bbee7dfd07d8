// Package ociimage packs Cove's container image without a container
// daemon: a root file system (a directory, made by debootstrap for the
// release image) with Cove's binaries in /usr/local/bin, written as an OCI
// image layout that registries and Kubernetes take (push it with crane or
// skopeo).
package ociimage

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/covesandbox/cove/internal/layertar"
)

// Spec is what the image holds.
type Spec struct {
	// RootFS is the directory of its root file system ("" = none: the
	// binaries alone).
	RootFS string
	// Binaries are copied to /usr/local/bin under their base names.
	Binaries []string
	// Tag names the image in the layout's index (org.opencontainers.image.ref.name).
	Tag string
	// Created is the image's creation time (zero: the epoch, for images
	// the same byte for byte from the same inputs).
	Created time.Time
}

// Write writes the image as an OCI layout in dir, which must not exist.
func Write(dir string, spec Spec) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists: the image is written to a new directory", dir)
	}
	img := empty.Image
	if spec.RootFS != "" {
		root, err := dirLayer(spec.RootFS)
		if err != nil {
			return fmt.Errorf("the root file system's layer: %w", err)
		}
		if img, err = mutate.AppendLayers(img, root); err != nil {
			return err
		}
	}
	bins, err := binariesLayer(spec.Binaries)
	if err != nil {
		return fmt.Errorf("the binaries' layer: %w", err)
	}
	if img, err = mutate.AppendLayers(img, bins); err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Created = v1.Time{Time: spec.Created}
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Entrypoint = []string{"/usr/local/bin/cove"}
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var opts []layout.Option
	if spec.Tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": spec.Tag}))
	}
	return p.AppendImage(img, opts...)
}

// binariesLayer holds each binary as /usr/local/bin/<name>, root's, 0755.
func binariesLayer(paths []string) (v1.Layer, error) {
	return layerOf(func(w io.Writer) error {
		tw := tar.NewWriter(w)
		for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
			if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				return err
			}
		}
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			st, err := f.Stat()
			if err == nil && !st.Mode().IsRegular() {
				err = fmt.Errorf("%s is not a file", p)
			}
			if err == nil {
				err = tw.WriteHeader(&tar.Header{Name: "usr/local/bin/" + filepath.Base(p), Typeflag: tar.TypeReg, Mode: 0o755, Size: st.Size()})
			}
			if err == nil {
				_, err = io.Copy(tw, f)
			}
			f.Close()
			if err != nil {
				return err
			}
		}
		return tw.Close()
	})
}

// dirLayer is a directory tree as a layer, packed as every layer Cove
// makes is (owners, modes, links never followed, hard links once);
// devices, sockets and fifos are left out.
func dirLayer(root string) (v1.Layer, error) {
	return layerOf(func(w io.Writer) error {
		return layertar.Pack(w, root, layertar.PackOptions{SkipSpecial: true})
	})
}

// layerOf makes a layer of the tar stream fill writes, spooled to a
// temporary file (a layer's digest is read before its content).
func layerOf(fill func(io.Writer) error) (v1.Layer, error) {
	f, err := os.CreateTemp("", "cove-image-layer-")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // open until the process ends
	if err := fill(f); err != nil {
		f.Close()
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(io.NewSectionReader(f, 0, 1<<62)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
