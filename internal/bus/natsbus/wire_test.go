package natsbus

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// TestWireRoundTripsEveryField fills every exported field of the bus
// messages, recursively and found by reflection, sends them through the wire
// encoding and compares: a field added to bus.InboundMessage or
// bus.OutboundMessage (or to the llm types they hold) that the wire forgets
// fails here (docs/scale-out.md#subjects-and-streams). Only the callbacks
// (Ack, Delivered) stay in-process.
func TestWireRoundTripsEveryField(t *testing.T) {
	t.Run("inbound", func(t *testing.T) {
		var in bus.InboundMessage
		fill(t, reflect.ValueOf(&in).Elem(), new(int), "InboundMessage")
		data, err := encodeIn(in)
		if err != nil {
			t.Fatalf("encodeIn: %v", err)
		}
		got, err := decodeIn(data)
		if err != nil {
			t.Fatalf("decodeIn: %v", err)
		}
		in.Ack = nil
		if !reflect.DeepEqual(got, in) {
			t.Fatalf("inbound changed on the wire:\n got %+v\nwant %+v", got, in)
		}
	})
	t.Run("outbound", func(t *testing.T) {
		var out bus.OutboundMessage
		fill(t, reflect.ValueOf(&out).Elem(), new(int), "OutboundMessage")
		data, err := encodeOut(out)
		if err != nil {
			t.Fatalf("encodeOut: %v", err)
		}
		got, err := decodeOut(data)
		if err != nil {
			t.Fatalf("decodeOut: %v", err)
		}
		out.Delivered = nil
		if !reflect.DeepEqual(got, out) {
			t.Fatalf("outbound changed on the wire:\n got %+v\nwant %+v", got, out)
		}
	})
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// fill sets v and everything under it to a non-zero value, each leaf a
// different one (n counts them) so that two fields swapped on the wire show.
// Callbacks are set to a no-op; the caller clears them before comparing. A
// kind fill does not know fails the test rather than staying zero unnoticed.
func fill(t *testing.T, v reflect.Value, n *int, path string) {
	t.Helper()
	*n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, *n, time.UTC)))
		return
	case v.Type() == rawType:
		v.Set(reflect.ValueOf(json.RawMessage(`{"n":` + strconv.Itoa(*n) + `}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path + "-" + strconv.Itoa(*n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			fill(t, v.Field(i), n, path+"."+f.Name)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n, path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), n, path+"["+strconv.Itoa(i)+"]")
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k := reflect.New(v.Type().Key()).Elem()
		fill(t, k, n, path+".key")
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, n, path+".value")
		v.SetMapIndex(k, e)
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { return nil }))
	default:
		t.Fatalf("fill: %s: kind %s not handled; teach fill about it", path, v.Kind())
	}
}
