package filesystem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"connectrpc.com/connect"

	"github.com/covesandbox/cove/internal/errs"
	pb "github.com/covesandbox/cove/sdk/go/envdpb/filesystem"
)

// maxPendingEvents bounds what a polled watcher keeps between polls.
const maxPendingEvents = 10000

// pollWatcher collects events for clients that poll (the Python sync SDK).
type pollWatcher struct {
	d       *dirWatch
	mu      sync.Mutex
	pending []*pb.FilesystemEvent
	err     error
	stop    chan struct{}
}

// CreateWatcher starts a watcher whose events GetWatcherEvents drains.
func (s *Service) CreateWatcher(ctx context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	_, p, err := s.resolve(req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	d, err := newDirWatch(p, req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, errs.ConnectError(err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	w := &pollWatcher{d: d, stop: make(chan struct{})}
	s.mu.Lock()
	s.watchers[id] = w
	s.mu.Unlock()
	go w.collect()
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

func (w *pollWatcher) collect() {
	for {
		select {
		case <-w.stop:
			return
		case ev, ok := <-w.d.w.Events:
			if !ok {
				return
			}
			for _, fe := range w.d.convert(ev) {
				w.mu.Lock()
				if len(w.pending) < maxPendingEvents {
					w.pending = append(w.pending, fe)
				}
				w.mu.Unlock()
			}
		case err, ok := <-w.d.w.Errors:
			if !ok {
				return
			}
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
		}
	}
}

// GetWatcherEvents returns and clears the events gathered since the last call.
func (s *Service) GetWatcherEvents(ctx context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	s.mu.Lock()
	w, ok := s.watchers[req.Msg.GetWatcherId()]
	s.mu.Unlock()
	if !ok {
		return nil, errs.ConnectError(errs.New(errs.NotFound, "watcher %q not found", req.Msg.GetWatcherId()))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, errs.ConnectError(errs.New(errs.Internal, "watcher failed: %v", w.err))
	}
	events := w.pending
	w.pending = nil
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: events}), nil
}

// RemoveWatcher stops a watcher.
func (s *Service) RemoveWatcher(ctx context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	s.mu.Lock()
	w, ok := s.watchers[req.Msg.GetWatcherId()]
	delete(s.watchers, req.Msg.GetWatcherId())
	s.mu.Unlock()
	if !ok {
		return nil, errs.ConnectError(errs.New(errs.NotFound, "watcher %q not found", req.Msg.GetWatcherId()))
	}
	close(w.stop)
	w.d.close()
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}
