package objstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/objstore"
	"github.com/covesandbox/cove/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.StopObjectStore()
	os.Exit(code)
}

// TestBucket runs every call against a real S3 server: what is put is got
// back byte for byte (in one request or in parts), a missing key is
// NotFound, prefixes keep buckets' users apart, bad settings are refused
// clearly.
func TestBucket(t *testing.T) {
	ctx := context.Background()
	url, creds := testutil.ObjectStore(t)
	b, err := objstore.Open(ctx, url+"/a", creds)
	if err != nil {
		t.Fatal(err)
	}
	small := []byte("hello, bucket")
	big := make([]byte, 40<<20) // more than two parts
	rand.Read(big)
	for key, data := range map[string][]byte{"x/small": small, "x/big": big} {
		size := int64(len(data))
		if key == "x/big" {
			size = -1 // streamed: uploaded in parts
		}
		if err := b.Put(ctx, key, bytes.NewReader(data), size); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		rc, n, err := b.Get(ctx, key)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || n != int64(len(data)) || !bytes.Equal(got, data) {
			t.Errorf("get %s: %d bytes (size %d), equal %v, %v", key, len(got), n, bytes.Equal(got, data), err)
		}
		if ok, err := b.Has(ctx, key); !ok || err != nil {
			t.Errorf("has %s: %v %v", key, ok, err)
		}
	}
	objs, err := b.List(ctx, "x/")
	if err != nil || len(objs) != 2 || objs[0].Key != "x/big" || objs[0].Size != int64(len(big)) || objs[1].Key != "x/small" ||
		time.Since(objs[1].Modified) > time.Minute {
		t.Errorf("list: %+v %v", objs, err)
	}
	// Another prefix of the same bucket sees none of it.
	other, err := objstore.Open(ctx, url+"/b", creds)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := other.Has(ctx, "x/small"); ok || err != nil {
		t.Errorf("another prefix has x/small: %v %v", ok, err)
	}
	if _, _, err := other.Get(ctx, "x/small"); !errs.Is(err, errs.NotFound) {
		t.Errorf("get of a missing key: %v, want NotFound", err)
	}
	if err := b.Delete(ctx, "x/small"); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Has(ctx, "x/small"); ok || err != nil {
		t.Errorf("has after delete: %v %v", ok, err)
	}
	if err := b.Delete(ctx, "x/small"); err != nil {
		t.Errorf("delete of a missing key: %v", err)
	}

	bad := []struct {
		name  string
		url   string
		creds objstore.Credentials
		kind  errs.Kind
	}{
		{"wrong secret", url, objstore.Credentials{AccessKey: creds.AccessKey, SecretKey: "wrong"}, errs.PermissionDenied},
		{"no bucket", strings.TrimSuffix(url, "/"+lastPart(url)), creds, errs.InvalidArgument},
		{"not http", "ftp://127.0.0.1/b", creds, errs.InvalidArgument},
		{"nobody there", "http://127.0.0.1:1/b", creds, errs.Unavailable},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := objstore.Open(ctx, tt.url, tt.creds); !errs.Is(err, tt.kind) {
				t.Errorf("open: %v, want %v", err, tt.kind)
			}
		})
	}
}

func lastPart(u string) string { return u[strings.LastIndex(u, "/")+1:] }
