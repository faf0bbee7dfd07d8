package server

import (
	"github.com/covesandbox/cove/internal/connguard"
	"github.com/covesandbox/cove/internal/controlplane/httpapi"
	"github.com/covesandbox/cove/internal/fdbudget"
	"github.com/covesandbox/cove/internal/metrics"
)

// health is what /health tells of guard's listeners and of the budget.
func health(guard *connguard.Guard, budget *fdbudget.Budget) func() httpapi.Health {
	return func() httpapi.Health {
		s := guard.Status()
		h := httpapi.Health{Unauthenticated: s.Unauthenticated, Max: s.Max, PerAddress: s.PerSource, Refused: s.Refused, Evicted: s.Evicted,
			DescriptorsInUse: budget.InUse(), DescriptorsShared: budget.Shared(), DescriptorsReserve: budget.Reserve()}
		for _, l := range s.Listeners {
			h.Listeners = append(h.Listeners, httpapi.ListenerHealth{Addr: l.Addr, Accepting: l.Accepting, AcceptErrors: l.AcceptErrors,
				LastError: l.LastError, LastErrorAt: l.LastErrorAt})
		}
		return h
	}
}

// guardMetrics is what the metrics read of guard's connections.
func guardMetrics(guard *connguard.Guard) func() metrics.Connections {
	return func() metrics.Connections {
		s := guard.Status()
		c := metrics.Connections{Unauthenticated: s.Unauthenticated, Refused: s.Refused, Evicted: s.Evicted}
		for _, l := range s.Listeners {
			c.AcceptErrors += l.AcceptErrors
		}
		return c
	}
}
