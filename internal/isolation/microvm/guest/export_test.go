package guest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestExportReader: the archive comes out whole only when the guest ends
// its frames saying so; its error, a cut stream, a frame too big and an
// archive over the limit are errors.
func TestExportReader(t *testing.T) {
	archive := bytes.Repeat([]byte("layer"), 1000)
	frames := func(body []byte, failure error) []byte {
		var buf bytes.Buffer
		fw := frameWriter{&buf}
		if _, err := fw.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := fw.end(failure); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	whole := frames(archive, nil)
	huge := binary.BigEndian.AppendUint32(nil, maxFrame+1)
	for _, tc := range []struct {
		name   string
		stream []byte
		max    int64
		want   string // "" = the archive, whole
	}{
		{"whole", whole, 1 << 20, ""},
		{"the guest failed", frames(archive[:100], errors.New("disk read error")), 1 << 20, "the guest: disk read error"},
		{"cut in a frame", whole[:200], 1 << 20, "unexpected EOF"},
		{"cut before the outcome", whole[:len(whole)-8], 1 << 20, "unexpected EOF"},
		{"nothing", nil, 1 << 20, "unexpected EOF"},
		{"a frame too big", huge, 1 << 20, "a frame of"},
		{"over the limit", whole, 4000, "more than 4000 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := io.ReadAll(NewExportReader(bytes.NewReader(tc.stream), tc.max))
			switch {
			case tc.want == "" && (err != nil || !bytes.Equal(got, archive)):
				t.Fatalf("%d bytes, %v; want the archive", len(got), err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v; want %q", err, tc.want)
			}
		})
	}
}
