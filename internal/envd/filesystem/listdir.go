package filesystem

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/envd/identity"
	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// ListDir lists a directory to the given depth (0 means 1) without following
// symlinks.
func (s *Service) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	u, root, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	var entries []*pb.EntryInfo
	err = identity.As(u, func() error {
		st, err := os.Stat(root)
		if err != nil {
			return PathError(root, err)
		}
		if !st.IsDir() {
			return errs.New(errs.InvalidArgument, "path '%s' is not a directory", root)
		}
		return listDir(ctx, root, depth, func(path string, info fs.FileInfo) {
			entries = append(entries, entryFromInfo(path, info))
		})
	})
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	return connect.NewResponse(&pb.ListDirResponse{Entries: entries}), nil
}

func listDir(ctx context.Context, dir string, depth int, fn func(string, fs.FileInfo)) error {
	if err := ctx.Err(); err != nil {
		return errs.Mark(errs.Canceled, err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return PathError(dir, err)
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		fn(p, info)
		if depth > 1 && de.IsDir() {
			if err := listDir(ctx, p, depth-1, fn); err != nil && !errs.Is(err, errs.NotFound) {
				return err
			}
		}
	}
	return nil
}
