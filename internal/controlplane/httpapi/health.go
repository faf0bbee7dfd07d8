package httpapi

import (
	"net/http"
	"time"
)

// Health is what the server tells of itself at GET /health: how its
// listeners fare, and what it holds for clients not yet authenticated.
type Health struct {
	Listeners []ListenerHealth
	// Unauthenticated connections held now, of at most Max, PerAddress
	// from one address; Refused counts the new ones closed at once, a cap
	// or the descriptor budget being full, Evicted those closed to make
	// room for one from an address that held fewer.
	Unauthenticated, Max, PerAddress int
	Refused, Evicted                 int64
	// Descriptors held by the shared pools (unauthenticated connections
	// among them), of at most Shared; Reserve more are kept for the API.
	DescriptorsInUse, DescriptorsShared, DescriptorsReserve int
}

// ListenerHealth is how one listener fares: Accepting is false while its
// accepts fail (it retries), the last failure LastError.
type ListenerHealth struct {
	Addr         string
	Accepting    bool
	AcceptErrors int64
	LastError    string
	LastErrorAt  time.Time
}

type healthJSON struct {
	Code       int            `json:"code"`
	Message    string         `json:"message"`
	Listeners  []listenerJSON `json:"listeners,omitempty"`
	Connection *connJSON      `json:"unauthenticatedConnections,omitempty"`
	FDs        *fdJSON        `json:"descriptors,omitempty"`
}

type listenerJSON struct {
	Addr         string     `json:"addr"`
	Accepting    bool       `json:"accepting"`
	AcceptErrors int64      `json:"acceptErrors"`
	LastError    string     `json:"lastError,omitempty"`
	LastErrorAt  *time.Time `json:"lastErrorAt,omitempty"`
}

type connJSON struct {
	Held       int   `json:"held"`
	Max        int   `json:"max"`
	PerAddress int   `json:"perAddress"`
	Refused    int64 `json:"refused"`
	Evicted    int64 `json:"evicted"`
}

type fdJSON struct {
	InUse   int `json:"sharedInUse"`
	Shared  int `json:"shared"`
	Reserve int `json:"reserve"`
}

// health answers 200 while every listener accepts, else 503 naming the
// one that fails and why.
func (a *API) health(w http.ResponseWriter, r *http.Request) {
	out := healthJSON{Code: http.StatusOK, Message: "Health check successful"}
	if a.Health == nil {
		writeJSON(w, out.Code, out)
		return
	}
	h := a.Health()
	for _, l := range h.Listeners {
		lj := listenerJSON{Addr: l.Addr, Accepting: l.Accepting, AcceptErrors: l.AcceptErrors, LastError: l.LastError}
		if !l.LastErrorAt.IsZero() {
			at := l.LastErrorAt.UTC()
			lj.LastErrorAt = &at
		}
		out.Listeners = append(out.Listeners, lj)
		if !l.Accepting {
			out.Code, out.Message = http.StatusServiceUnavailable, "the listener on "+l.Addr+" fails to accept connections (retrying): "+l.LastError
		}
	}
	out.Connection = &connJSON{Held: h.Unauthenticated, Max: h.Max, PerAddress: h.PerAddress, Refused: h.Refused, Evicted: h.Evicted}
	if h.DescriptorsShared > 0 {
		out.FDs = &fdJSON{InUse: h.DescriptorsInUse, Shared: h.DescriptorsShared, Reserve: h.DescriptorsReserve}
	}
	writeJSON(w, out.Code, out)
}
