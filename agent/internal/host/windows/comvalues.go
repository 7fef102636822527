package windows

import "math"

// What COM hands back, made into Go values without COM: the conversions
// wua_windows.go and Task Scheduler's calls need, tested on any platform.

// comInt is an integer property's value, whatever width the VARIANT held;
// 0 for anything else.
func comInt(v any) int {
	switch x := v.(type) {
	case int32:
		return int(x)
	case int64:
		return int(x)
	case uint32:
		return int(x)
	case int16:
		return int(x)
	case uint8:
		return int(x)
	case int:
		return x
	}
	return 0
}

// comInt64 is a numeric property's value as an int64, capped at the largest
// one; 0 for anything else.
func comInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return int64(min(x, math.MaxInt64))
	case float64:
		return int64(x)
	}
	return 0
}

// comDecimal is a DECIMAL (VT_DECIMAL, as IUpdate's download sizes are),
// which go-ole does not convert, from the 16 bytes of its VARIANT: its scale
// in byte 2, its sign in byte 3, the high 32 bits of its 96-bit value in
// bytes 4-7 and the low 64 in bytes 8-15 (little-endian). 0 when negative;
// the largest int64 when it does not fit.
func comDecimal(raw [16]byte) int64 {
	scale, negative := raw[2], raw[3]&0x80 != 0
	high := uint32(raw[4]) | uint32(raw[5])<<8 | uint32(raw[6])<<16 | uint32(raw[7])<<24
	var low uint64
	for i := 15; i >= 8; i-- {
		low = low<<8 | uint64(raw[i])
	}
	switch {
	case negative:
		return 0
	case high != 0 || low > math.MaxInt64:
		return math.MaxInt64
	}
	n := int64(low)
	for ; scale > 0; scale-- {
		n /= 10
	}
	return n
}
