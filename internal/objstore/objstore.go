// Package objstore is the S3-compatible bucket a cluster's nodes share
// what one of them made and the others need: template layers, the files
// builds copy in. Keys are content-addressed by their writers, so an
// object once written never changes: a reader verifies what it gets
// against its name, and two writers of one key write the same bytes.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/covesandbox/cove/internal/errs"
)

// partSize is the size of each part of a multipart upload.
const partSize = 16 << 20

// Credentials sign the requests (S3's access key and secret key).
type Credentials struct {
	AccessKey, SecretKey string
}

// Bucket is one bucket, or a prefix of one, of an S3-compatible server.
type Bucket struct {
	client *minio.Client
	bucket string
	prefix string // "" or ending in "/"
}

// Open connects to the bucket rawURL names — http(s)://host[:port]/bucket
// [/prefix][?region=…] — and makes it when it does not exist yet.
func Open(ctx context.Context, rawURL string, creds Credentials) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.New(errs.InvalidArgument, "object store %q: want http(s)://host[:port]/bucket[/prefix]", rawURL)
	}
	bucket, prefix, _ := strings.Cut(strings.Trim(u.Path, "/"), "/")
	if bucket == "" {
		return nil, errs.New(errs.InvalidArgument, "object store %q names no bucket", rawURL)
	}
	if prefix != "" {
		prefix += "/"
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(creds.AccessKey, creds.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       u.Query().Get("region"),
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, errs.Mark(errs.InvalidArgument, fmt.Errorf("object store %s: %w", u.Host, err))
	}
	b := &Bucket{client: client, bucket: bucket, prefix: prefix}
	ok, err := client.BucketExists(ctx, bucket)
	if err != nil {
		return nil, b.classify(err, "open bucket %s at %s", bucket, u.Host)
	}
	if !ok {
		if err := client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: u.Query().Get("region")}); err != nil {
			if ok, _ := client.BucketExists(ctx, bucket); !ok { // not made by another process meanwhile
				return nil, b.classify(err, "make bucket %s at %s", bucket, u.Host)
			}
		}
	}
	return b, nil
}

// Put stores size bytes of r (-1: until EOF) under key; readers see the
// whole object or none.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	_, err := b.client.PutObject(ctx, b.bucket, b.prefix+key, r, size, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    partSize, // of an upload of unknown size, each buffered
	})
	if err != nil {
		return b.classify(err, "put %s", key)
	}
	return nil
}

// Get opens the object under key; a missing one is errs.NotFound.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	obj, err := b.client.GetObject(ctx, b.bucket, b.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, b.classify(err, "get %s", key)
	}
	st, err := obj.Stat() // the first request: a missing object fails here
	if err != nil {
		obj.Close()
		return nil, 0, b.classify(err, "get %s", key)
	}
	return obj, st.Size, nil
}

// Has reports whether an object is stored under key.
func (b *Bucket) Has(ctx context.Context, key string) (bool, error) {
	_, err := b.client.StatObject(ctx, b.bucket, b.prefix+key, minio.StatObjectOptions{})
	if err == nil {
		return true, nil
	}
	if err = b.classify(err, "stat %s", key); errs.Is(err, errs.NotFound) {
		return false, nil
	}
	return false, err
}

// Delete removes the object under key (a missing one is no error).
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.client.RemoveObject(ctx, b.bucket, b.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		return b.classify(err, "delete %s", key)
	}
	return nil
}

// Object is a stored object as a listing shows it.
type Object struct {
	Key      string // relative to the bucket's prefix
	Size     int64
	Modified time.Time
}

// List returns the objects under prefix (relative to the bucket's prefix).
func (b *Bucket) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for obj := range b.client.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, b.classify(obj.Err, "list %s", prefix)
		}
		out = append(out, Object{Key: strings.TrimPrefix(obj.Key, b.prefix), Size: obj.Size, Modified: obj.LastModified})
	}
	return out, nil
}

// classify marks an error of the server or of the way to it by kind.
func (b *Bucket) classify(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.Code == "NoSuchKey" || resp.Code == "NotFound" || resp.StatusCode == 404:
			return errs.Mark(errs.NotFound, fmt.Errorf("object store: %s: %w", what, err))
		case resp.StatusCode == 403 || resp.Code == "AccessDenied" || resp.Code == "SignatureDoesNotMatch" || resp.Code == "InvalidAccessKeyId":
			return errs.Mark(errs.PermissionDenied, fmt.Errorf("object store: %s: %w", what, err))
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errs.Mark(errs.Canceled, fmt.Errorf("object store: %s: %w", what, err))
	}
	return errs.Mark(errs.Unavailable, fmt.Errorf("object store: %s: %w", what, err))
}
