package tablerec

import (
	"errors"
	"slices"
	"testing"

	"github.com/warrenmq/warren/protocol"
)

func TestReader(t *testing.T) {
	rec := protocol.Table{"s": "x", "b": true, "i": int16(-4), "l": []any{"a", "b"}, "n": []any{int8(1), uint32(7)},
		"t": protocol.Table{"k": "v"}, "empty": protocol.Table{}}
	r := Open("test record", rec, 1)
	if r.String("s") != "x" || !r.Bool("b") || r.Int("i") != -4 || r.IntOr("absent", 9) != 9 || r.StringOr("absent", "d") != "d" ||
		!r.BoolOr("absent", true) || !slices.Equal(r.Strings("l"), []string{"a", "b"}) || !slices.Equal(r.Uints("n"), []uint64{1, 7}) ||
		r.Table("t")["k"] != "v" || r.Table("empty") != nil || r.Strings("absent") != nil || r.Version() != 1 {
		t.Fatal("a field read wrong")
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		read  func(r *Reader)
		field string
	}{
		{func(r *Reader) { r.String("b") }, "b"},
		{func(r *Reader) { r.Bool("missing") }, "missing"},
		{func(r *Reader) { r.IntOr("s", 0) }, "s"},
		{func(r *Reader) { r.Strings("n") }, "n"},
		{func(r *Reader) { r.Table("l") }, "l"},
	} {
		r := Open("test record", rec, 1)
		c.read(r)
		r.String("s") // after a problem, reads change nothing
		var fe *FieldError
		if err := r.Err(); !errors.As(err, &fe) || fe.Field != c.field || fe.Kind != "test record" {
			t.Fatalf("field %s: %v", c.field, err)
		}
	}
	for _, v := range []any{int64(3), int64(0), "2"} {
		if err := Open("test record", protocol.Table{VersionKey: v}, 2).Err(); err == nil {
			t.Fatalf("version %v read", v)
		}
	}
	if r := Open("test record", protocol.Table{VersionKey: int64(2)}, 2); r.Err() != nil || r.Version() != 2 {
		t.Fatal("a known version refused")
	}
}
