package postgres_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/controlplane/store/storetest"
	"github.com/covesandbox/cove/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.StopPostgres()
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), testutil.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestReplicasStartTogether: API replicas opening one database at once all
// migrate it without error (one at a time), and all get the same secret
// however many generate one at the same moment.
func TestReplicasStartTogether(t *testing.T) {
	dsn := testutil.Postgres(t)
	const replicas = 6
	var wg sync.WaitGroup
	secrets := make([][]byte, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			s, err := postgres.Open(ctx, dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			secrets[i], errs[i] = s.Secret(ctx, "hmac", func() ([]byte, error) { return []byte{byte(i + 1)}, nil })
		}()
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if string(secrets[i]) != string(secrets[0]) {
			t.Errorf("replica %d got secret %v, replica 0 %v", i, secrets[i], secrets[0])
		}
	}
}
