package template

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/covesandbox/cove/internal/addrpolicy"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/fsutil"
	"github.com/covesandbox/cove/internal/layertar"
	"github.com/covesandbox/cove/internal/network"
)

// Local image sources: an OCI layout directory or a `docker save` tarball
// on the node, with an optional tag after the last colon.
const (
	ociPrefix     = "oci:"
	archivePrefix = "docker-archive:"
)

// IsLocalImage reports whether ref names an image on the node's own disk.
func IsLocalImage(ref string) bool {
	return strings.HasPrefix(ref, ociPrefix) || strings.HasPrefix(ref, archivePrefix)
}

// openImage finds an image: "oci:DIR[:TAG]", "docker-archive:FILE[:TAG]",
// or a registry reference (credentials from the docker config, as
// `docker pull` finds them; a failed pull is a *pullErr).
func openImage(ctx context.Context, ref string, registries *addrpolicy.Policy) (v1.Image, error) {
	switch {
	case strings.HasPrefix(ref, ociPrefix):
		p, tag := splitTag(strings.TrimPrefix(ref, ociPrefix))
		return fromLayout(p, tag)
	case strings.HasPrefix(ref, archivePrefix):
		p, tag := splitTag(strings.TrimPrefix(ref, archivePrefix))
		var t *name.Tag
		if tag != "" {
			nt, err := name.NewTag(tag)
			if err != nil {
				return nil, errs.New(errs.InvalidArgument, "image tag %q: %v", tag, err)
			}
			t = &nt
		}
		img, err := tarball.ImageFromPath(p, t)
		if err != nil {
			return nil, errs.New(errs.InvalidArgument, "image archive %s: %v", p, err)
		}
		return img, nil
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "image reference %q: %v", ref, err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
		remote.WithTransport(registryTransport(registries)))
	if err != nil {
		return nil, &pullErr{err}
	}
	return img, nil
}

// pullErr is a pull that failed at the registry: what it says is the far
// end's, for the node's log only (pullError is the tenant's).
type pullErr struct{ err error }

func (e *pullErr) Error() string { return e.err.Error() }
func (e *pullErr) Unwrap() error { return e.err }

// splitTag splits "path:tag" at a colon after the last slash.
func splitTag(s string) (string, string) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 || strings.Contains(s[i:], "/") {
		return s, ""
	}
	return s[:i], s[i+1:]
}

// fromLayout picks an image out of an OCI layout: the one tagged tag
// (org.opencontainers.image.ref.name), or the only one, descending into
// nested indexes for this machine's platform.
func fromLayout(dir, tag string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "OCI layout %s: %v", dir, err)
	}
	return pickImage(idx, tag, dir)
}

func pickImage(idx v1.ImageIndex, tag, where string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, errs.New(errs.InvalidArgument, "OCI index of %s: %v", where, err)
	}
	var found []v1.Descriptor
	for _, d := range m.Manifests {
		if tag != "" && d.Annotations["org.opencontainers.image.ref.name"] != tag {
			continue
		}
		if d.Platform != nil && (d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH) {
			continue
		}
		found = append(found, d)
	}
	if len(found) != 1 {
		return nil, errs.New(errs.InvalidArgument, "%s holds %d images for tag %q and linux/%s; name one with :TAG", where, len(found), tag, runtime.GOARCH)
	}
	if found[0].MediaType.IsIndex() {
		child, err := idx.ImageIndex(found[0].Digest)
		if err != nil {
			return nil, err
		}
		return pickImage(child, "", where)
	}
	return idx.Image(found[0].Digest)
}

// importImage stores an image's layers (each named by its diff id, so an
// image shared by templates, or a base shared by images, is stored once)
// and returns them lowest first with the image's run settings.
func (l Layers) importImage(ctx context.Context, img v1.Image, budget *fsutil.Budget, progress func(string)) ([]string, v1.Config, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, v1.Config{}, fmt.Errorf("image config: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, v1.Config{}, fmt.Errorf("image layers: %w", err)
	}
	var names []string
	for i, layer := range layers {
		if err := ctx.Err(); err != nil {
			return nil, v1.Config{}, err
		}
		diff, err := layer.DiffID()
		if err != nil {
			return nil, v1.Config{}, fmt.Errorf("layer %d: %w", i, err)
		}
		name := "sha256-" + diff.Hex[:32]
		if l.Has(name) {
			progress(fmt.Sprintf("layer %d/%d %s: cached", i+1, len(layers), diff.Hex[:12]))
			names = append(names, name)
			continue
		}
		progress(fmt.Sprintf("layer %d/%d %s: extracting", i+1, len(layers), diff.Hex[:12]))
		if err := l.importLayer(layer, name, budget); err != nil {
			return nil, v1.Config{}, fmt.Errorf("layer %s: %w", diff.Hex[:12], err)
		}
		names = append(names, name)
	}
	return names, cf.Config, nil
}

func (l Layers) importLayer(layer v1.Layer, name string, budget *fsutil.Budget) error {
	rc, err := layer.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	stage, err := l.stage()
	if err != nil {
		return err
	}
	if err := layertar.Unpack(rc, stage, layertar.UnpackOptions{Overlay: true, Budget: budget}); err != nil {
		removeStage(stage)
		return err
	}
	_, err = l.commit(stage, name)
	return err
}

// registryTransport connects to registries, their token realms and
// wherever they redirect as the address policy allows (an image reference
// is user input; the check is made on the address actually dialled, and
// before a request is handed to the environment's proxy, on the addresses
// its host resolves to), and never to a sandbox (the nodes' firewalls
// keep the marked sockets off them).
func registryTransport(pol *addrpolicy.Policy) http.RoundTripper {
	tr := remote.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: pol.Control(network.MarkTenant)}
	tr.DialContext = dialer.DialContext
	envProxy := tr.Proxy
	tr.Proxy = func(req *http.Request) (*url.URL, error) {
		u, err := envProxy(req)
		if err != nil || u == nil {
			return u, err
		}
		addrs, err := net.DefaultResolver.LookupNetIP(req.Context(), "ip", req.URL.Hostname())
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if err := pol.Check(a); err != nil {
				return nil, err
			}
		}
		return u, nil
	}
	return tr
}

// farEnd reports whether err came of talking to a registry: its answer
// or the connection.
func farEnd(err error) bool {
	var te *transport.Error
	var ue *url.Error
	var oe *net.OpError
	var r *addrpolicy.Refused
	return errors.As(err, &te) || errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &r)
}

// pullError is what a tenant reads of a failed pull (its build's log and
// status): the status code the registry answered, with the registry API's
// error codes it named, or a fixed reason (addrpolicy.Reason) — never the
// far end's body or headers, which may be a service's that only the host
// was to see.
func pullError(ref string, err error) error {
	var te *transport.Error
	var refused *addrpolicy.Refused
	switch {
	case errors.As(err, &refused):
		return errs.New(errs.PermissionDenied, "pull %s: %v", ref, refused)
	case errors.As(err, &te):
		msg := fmt.Sprintf("pull %s: the registry answered %d %s", ref, te.StatusCode, http.StatusText(te.StatusCode))
		var codes []string
		for _, d := range te.Errors {
			if registryCodes[d.Code] && !slices.Contains(codes, string(d.Code)) {
				codes = append(codes, string(d.Code))
			}
		}
		if len(codes) > 0 {
			msg += " (" + strings.Join(codes, ", ") + ")"
		}
		return errs.New(errs.InvalidArgument, "%s", msg)
	case farEnd(err):
		return errs.New(errs.InvalidArgument, "pull %s: %s", ref, addrpolicy.Reason(err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return errs.New(errs.InvalidArgument, "pull %s: the registry's answer is not a usable image for linux/%s, or names a token service or redirect that is refused", ref, runtime.GOARCH)
}

// registryCodes are the error codes of the registry API (a fixed set,
// safe to repeat).
var registryCodes = map[transport.ErrorCode]bool{
	transport.BlobUnknownErrorCode: true, transport.BlobUploadInvalidErrorCode: true, transport.BlobUploadUnknownErrorCode: true,
	transport.DigestInvalidErrorCode: true, transport.ManifestBlobUnknownErrorCode: true, transport.ManifestInvalidErrorCode: true,
	transport.ManifestUnknownErrorCode: true, transport.ManifestUnverifiedErrorCode: true, transport.NameInvalidErrorCode: true,
	transport.NameUnknownErrorCode: true, transport.SizeInvalidErrorCode: true, transport.TagInvalidErrorCode: true,
	transport.UnauthorizedErrorCode: true, transport.DeniedErrorCode: true, transport.UnsupportedErrorCode: true,
	transport.TooManyRequestsErrorCode: true,
}
