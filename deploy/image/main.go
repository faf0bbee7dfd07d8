// Command image writes Cove's container image (the one deploy/helm/cove
// runs) as an OCI image layout, without a container daemon: a root file
// system made by scripts/image-rootfs.sh (Debian with what E2B's base
// template has: the base template of a node in a pod is the image's /usr)
// and cove, cove-sandbox and runsc in /usr/local/bin. `make image` runs it;
// docs/DEPLOY.md says how to push the result.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/covesandbox/cove/internal/ociimage"
)

func main() {
	rootfs := flag.String("rootfs", "", "the image's root file system (a directory)")
	bin := flag.String("bin", "bin", "directory holding cove, cove-sandbox and runsc")
	out := flag.String("o", "bin/cove-image", "the OCI layout to write (a new directory)")
	tag := flag.String("tag", "latest", "the image's tag in the layout")
	flag.Parse()
	var bins []string
	for _, name := range []string{"cove", "cove-sandbox", "runsc"} {
		bins = append(bins, filepath.Join(*bin, name))
	}
	if err := ociimage.Write(*out, ociimage.Spec{RootFS: *rootfs, Binaries: bins, Tag: *tag}); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote the image %s to %s (an OCI layout)\n", *tag, *out)
}
