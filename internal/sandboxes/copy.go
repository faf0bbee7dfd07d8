package sandboxes

import "github.com/covesandbox/cove/internal/template"

// Copy is what SaveLayer kept of a sandbox, until Release.
type Copy struct {
	Info  Info                   // the sandbox as it was copied
	Layer template.LayerSum      // its files
	Image *template.ProcessImage // its processes, when asked for and its driver can copy them
	// Blobs, for a copy a cluster's node shared, are the object store's
	// archives of the layers it stacks and of its own (name → SHA-256).
	Blobs   map[string]string
	release func()
}

// NewCopy is a copy kept elsewhere (a cluster's node) that release lets go.
func NewCopy(info Info, layer template.LayerSum, image *template.ProcessImage, blobs map[string]string, release func()) Copy {
	return Copy{Info: info, Layer: layer, Image: image, Blobs: blobs, release: release}
}

// Release lets Collect have the layer (the caller names it first: a
// template build, a sandbox) and removes the image.
func (c Copy) Release() { c.release() }
