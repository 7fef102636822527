package windows

import (
	le "encoding/binary"
	"math"
	"testing"
)

func decimalBytes(scale byte, negative bool, high uint32, low uint64) [16]byte {
	var raw [16]byte
	raw[0] = 14 // VT_DECIMAL, where the VARIANT's type would be
	raw[2] = scale
	if negative {
		raw[3] = 0x80
	}
	le.LittleEndian.PutUint32(raw[4:8], high)
	le.LittleEndian.PutUint64(raw[8:16], low)
	return raw
}

func TestComDecimal(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  [16]byte
		want int64
	}{
		{"a cumulative update's 1.4 GB", decimalBytes(0, false, 0, 1_503_238_553), 1_503_238_553},
		{"scaled: 12.345 bytes", decimalBytes(3, false, 0, 12_345), 12},
		{"negative", decimalBytes(0, true, 0, 5), 0},
		{"beyond 64 bits", decimalBytes(0, false, 1, 0), math.MaxInt64},
		{"beyond int64", decimalBytes(0, false, 0, math.MaxUint64), math.MaxInt64},
	} {
		if got := comDecimal(tc.raw); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestComNumbers(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int
	}{{int32(-2147023838), -2147023838}, {int64(7), 7}, {uint32(0x41303), 0x41303}, {int16(2), 2}, {uint8(1), 1}, {"3", 0}, {nil, 0}} {
		if got := comInt(tc.v); got != tc.want {
			t.Errorf("comInt(%#v) = %d, want %d", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    any
		want int64
	}{{uint64(math.MaxUint64), math.MaxInt64}, {float64(1.5e9), 1_500_000_000}, {int32(5), 5}, {true, 0}} {
		if got := comInt64(tc.v); got != tc.want {
			t.Errorf("comInt64(%#v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// SERVICE_STATUS.dwCurrentState's values (winsvc.h).
func TestServiceStateOf(t *testing.T) {
	for code, want := range map[uint32]ServiceState{
		1: ServiceStopped, 2: ServiceStartPending, 3: ServiceStopPending, 4: ServiceRunning,
		5: ServiceOther, 6: ServiceOther, 7: ServiceOther, 0: ServiceOther,
	} {
		if got := serviceStateOf(code); got != want {
			t.Errorf("dwCurrentState %d: %s, want %s", code, got, want)
		}
	}
}
