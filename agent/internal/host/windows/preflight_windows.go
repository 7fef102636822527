//go:build windows

package windows

import (
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	modwinhttp                              = windows.NewLazySystemDLL("winhttp.dll")
	procWinHttpGetDefaultProxyConfiguration = modwinhttp.NewProc("WinHttpGetDefaultProxyConfiguration")
	modkernel32                             = windows.NewLazySystemDLL("kernel32.dll")
	procGlobalFree                          = modkernel32.NewProc("GlobalFree")
)

// winHTTPProxyInfo is WINHTTP_PROXY_INFO.
type winHTTPProxyInfo struct {
	accessType  uint32
	proxy       *uint16
	proxyBypass *uint16
}

// winHTTPAccessTypeNamedProxy is WINHTTP_ACCESS_TYPE_NAMED_PROXY: a proxy
// is set (`netsh winhttp set proxy`); anything else is direct access.
const winHTTPAccessTypeNamedProxy = 3

// readWinHTTPProxy reads the machine's WinHTTP proxy with
// WinHttpGetDefaultProxyConfiguration, whose strings the caller frees with
// GlobalFree.
func readWinHTTPProxy() (WinHTTPProxyConfig, error) {
	if err := procWinHttpGetDefaultProxyConfiguration.Find(); err != nil {
		return WinHTTPProxyConfig{}, err
	}
	var info winHTTPProxyInfo
	r, _, err := procWinHttpGetDefaultProxyConfiguration.Call(uintptr(unsafe.Pointer(&info)))
	if r == 0 {
		return WinHTTPProxyConfig{}, fmt.Errorf("WinHttpGetDefaultProxyConfiguration: %w", err)
	}
	defer globalFree(info.proxy)
	defer globalFree(info.proxyBypass)
	if info.accessType != winHTTPAccessTypeNamedProxy {
		return WinHTTPProxyConfig{}, nil
	}
	return WinHTTPProxyConfig{Proxy: windows.UTF16PtrToString(info.proxy), Bypass: windows.UTF16PtrToString(info.proxyBypass)}, nil
}

func globalFree(p *uint16) {
	if p != nil && procGlobalFree.Find() == nil {
		procGlobalFree.Call(uintptr(unsafe.Pointer(p)))
	}
}

// diskFreeBytes is the room on drive ("C:") that this account may use
// (GetDiskFreeSpaceEx's FreeBytesAvailableToCaller: quotas count).
func diskFreeBytes(drive string) (int64, error) {
	root, err := windows.UTF16PtrFromString(drive + `\`)
	if err != nil {
		return -1, err
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(root, &avail, &total, &free); err != nil {
		return -1, fmt.Errorf(`GetDiskFreeSpaceEx %s\: %w`, drive, err)
	}
	if avail > math.MaxInt64 {
		return math.MaxInt64, nil
	}
	return int64(avail), nil
}
