package dtrain

import (
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"dtrain.dev/dtrain/internal/cdt"
)

// Options are the keys and values a constructor or call accepts, as documented in
// dtrain.h. Values may be any Go integer (set as int), float32/float64 (double), bool, or
// string, or a []int32 of token ids ("stop_tokens", "eos_token_ids"), set as the string
// "3,7"; a nil or empty map passes no options. The library rejects unknown keys and values
// of the wrong type with ErrInvalidArgument and a message that lists what it accepts.
type Options = map[string]any

// newOptions builds a dt_options from opts; the caller must call free (also on error).
// An empty map yields the NULL handle, which every call reads as "no options".
func newOptions(opts Options) (cdt.Options, func(), error) {
	if len(opts) == 0 {
		return 0, func() {}, nil
	}
	var h cdt.Options
	if err := check(cdt.Dt_options_create(&h)); err != nil {
		return 0, func() {}, err
	}
	free := func() { cdt.Dt_options_destroy(h) }
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same map always fails on the same key
	for _, k := range keys {
		if err := setOption(h, k, opts[k]); err != nil {
			free()
			return 0, func() {}, err
		}
	}
	return h, free, nil
}

func setOption(h cdt.Options, key string, value any) error {
	if value == nil {
		return invalid("option %q has a nil value", key)
	}
	v := reflect.ValueOf(value)
	switch v.Kind() {
	case reflect.Bool:
		b := int32(0)
		if v.Bool() {
			b = 1
		}
		return check(cdt.Dt_options_set_bool(h, key, b))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return check(cdt.Dt_options_set_int(h, key, v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := v.Uint()
		if u > math.MaxInt64 {
			return invalid("option %q = %d does not fit in int64", key, u)
		}
		return check(cdt.Dt_options_set_int(h, key, int64(u)))
	case reflect.Float32, reflect.Float64:
		return check(cdt.Dt_options_set_double(h, key, v.Float()))
	case reflect.String:
		return check(cdt.Dt_options_set_string(h, key, v.String()))
	}
	if ids, ok := value.([]int32); ok {
		return check(cdt.Dt_options_set_string(h, key, intList(ids)))
	}
	return invalid("option %q has a value of type %T; use an integer, float, bool, string or []int32",
		key, value)
}

// intList writes token ids as "3,7".
func intList(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(int64(id), 10)
	}
	return strings.Join(parts, ",")
}

// intOption reads an integer-valued option from opts, for the binding's own sizing.
func intOption(opts Options, key string) (int64, bool) {
	value, ok := opts[key]
	if !ok || value == nil {
		return 0, false
	}
	v := reflect.ValueOf(value)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if v.Uint() <= math.MaxInt64 {
			return int64(v.Uint()), true
		}
	}
	return 0, false
}
