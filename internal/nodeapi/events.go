package nodeapi

import (
	"sync"

	pb "github.com/covesandbox/cove/internal/nodeapi/nodepb"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// followerBuffer is how many events a follower may lag behind before it
// is dropped (it reconnects and reconciles: events are not stored).
const followerBuffer = 1024

// hub fans the node's events out to the callers of Events.
type hub struct {
	mu        sync.Mutex
	followers map[chan *pb.Event]struct{}
}

func newHub() *hub { return &hub{followers: map[chan *pb.Event]struct{}{}} }

// join follows the events from now; leave stops.
func (h *hub) join() (<-chan *pb.Event, func()) {
	ch := make(chan *pb.Event, followerBuffer)
	h.mu.Lock()
	h.followers[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.followers[ch]; ok {
			delete(h.followers, ch)
			close(ch)
		}
	}
}

// publish never waits: a follower whose buffer is full is dropped (its
// channel closed).
func (h *hub) publish(kind pb.Event_Kind, info sandboxes.Info) {
	ev := &pb.Event{Kind: kind, Sandbox: infoToPB(info)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.followers {
		select {
		case ch <- ev:
		default:
			delete(h.followers, ch)
			close(ch)
		}
	}
}

// close drops every follower.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.followers {
		delete(h.followers, ch)
		close(ch)
	}
}
