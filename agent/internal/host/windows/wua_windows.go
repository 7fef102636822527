//go:build windows

package windows

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	ole "github.com/go-ole/go-ole"
	"github.com/go-ole/go-ole/oleutil"

	"winpool.dev/agent/internal/decide"
)

// wuaSession is WindowsUpdate on the Windows Update Agent's COM API (the
// documented IUpdateSession calls: CreateUpdateSearcher().Search,
// CreateUpdateDownloader().Download, CreateUpdateInstaller().Install), on
// the thread that created it: COM objects belong to it.
type wuaSession struct {
	wu      wuCalls
	session *ole.IDispatch
	items   []*ole.IDispatch
	done    func()
}

// openWUA starts a session on this thread; Close ends it.
func openWUA() (*wuaSession, error) {
	done, err := comThread()
	if err != nil {
		return nil, err
	}
	s := &wuaSession{done: done}
	s.session = s.wu.create("Microsoft.Update.Session")
	if s.wu.err != nil {
		s.Close()
		return nil, s.wu.wrap("creating a Windows Update session")
	}
	s.wu.put(s.session, "ClientApplicationID", "winpool-agent")
	// Titles in English (IUpdateSession2.UserLocale, LCID 1033) for the
	// agent's messages only: nothing is selected by a title.
	_, _ = oleutil.PutProperty(s.session, "UserLocale", uint32(1033))
	return s, nil
}

func (s *wuaSession) Close() {
	if s.session != nil {
		s.session.Release()
	}
	s.done()
}

// comThread locks the goroutine to its thread and starts COM on it: COM
// objects belong to the thread that made them. done ends both.
func comThread() (done func(), err error) {
	runtime.LockOSThread()
	if err := ole.CoInitializeEx(0, ole.COINIT_MULTITHREADED); err != nil {
		// S_FALSE: already initialized on this thread, which is fine.
		if oe, ok := err.(*ole.OleError); !ok || oe.Code() != 1 {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("initializing COM: %w", err)
		}
	}
	return func() { ole.CoUninitialize(); runtime.UnlockOSThread() }, nil
}

func (s *wuaSession) Search(criteria string) ([]decide.WUUpdate, error) {
	w := &s.wu
	found := w.call(w.call(s.session, "CreateUpdateSearcher"), "Search", criteria)
	updates := w.get(found, "Updates")
	n := w.int(updates, "Count")
	offered := make([]decide.WUUpdate, 0, n)
	for i := 0; i < n && w.err == nil; i++ {
		item := w.get(updates, "Item", i)
		offered = append(offered, w.describe(item))
		s.items = append(s.items, item)
	}
	if w.err != nil {
		return nil, w.err
	}
	return offered, nil
}

// DownloadPriority's values (dpLow, dpNormal).
const (
	dpLow    = 1
	dpNormal = 2
)

func (s *wuaSession) Download(i int, background bool) (int, int32, error) {
	w := &s.wu
	item := s.items[i]
	if !w.bool(item, "EulaAccepted") {
		w.call(item, "AcceptEula")
	}
	downloader := w.call(s.session, "CreateUpdateDownloader")
	w.put(downloader, "Updates", s.collection(item))
	priority := int32(dpNormal) // a DownloadPriority is a VT_I4
	if background {
		priority = dpLow
	}
	w.put(downloader, "Priority", priority)
	dl := w.call(downloader, "Download")
	rc, hr := w.int(dl, "ResultCode"), w.int(dl, "HResult")
	return rc, int32(hr), w.err
}

func (s *wuaSession) InstallerBusy() (bool, error) {
	w := &s.wu
	busy := w.bool(w.call(s.session, "CreateUpdateInstaller"), "IsBusy")
	return busy, w.err
}

// go-ole's errors have the methods thrownHRESULT reads.
var (
	_ comError                      = (*ole.OleError)(nil)
	_ interface{ SubError() error } = (*ole.OleError)(nil)
	_ comException                  = ole.EXCEPINFO{}
)

func (s *wuaSession) Install(i int) (int, int32, bool, error) {
	w := &s.wu
	installer := w.call(s.session, "CreateUpdateInstaller")
	w.put(installer, "Updates", s.collection(s.items[i]))
	res := w.call(installer, "Install")
	rc, hr, reboot := w.int(res, "ResultCode"), w.int(res, "HResult"), w.bool(res, "RebootRequired")
	return rc, int32(hr), reboot, w.err
}

// collection is an IUpdateCollection of one update.
func (s *wuaSession) collection(item *ole.IDispatch) *ole.IDispatch {
	coll := s.wu.create("Microsoft.Update.UpdateColl")
	s.wu.call(coll, "Add", item)
	return coll
}

// describe reads, of one IUpdate, what decide.SelectWindowsUpdates selects by
// (none of it language-dependent) and its title for messages.
func (w *wuCalls) describe(item *ole.IDispatch) decide.WUUpdate {
	u := decide.WUUpdate{
		Title:     w.str(item, "Title"),
		Type:      w.int(item, "Type"),
		Size:      w.decimal(item, "MaxDownloadSize"),
		Published: w.time(item, "LastDeploymentChangeTime"),
		// IUpdate3: every Windows Update Agent of a supported Windows has
		// it; unknown reads as not optional.
		BrowseOnly: w.optBool(item, "BrowseOnly"),
	}
	cats := w.get(item, "Categories")
	for j := 0; j < w.int(cats, "Count") && w.err == nil; j++ {
		u.CategoryIDs = append(u.CategoryIDs, w.str(w.get(cats, "Item", j), "CategoryID"))
	}
	kbs := w.get(item, "KBArticleIDs")
	for j := 0; j < w.int(kbs, "Count") && w.err == nil; j++ {
		u.KBs = append(u.KBs, w.strItem(kbs, j))
	}
	// IUpdate2: for the record only, so a Windows Update Agent that cannot
	// say them costs the search nothing.
	u.CveIDs = w.optStrings(item, "CveIDs")
	behavior := w.get(item, "InstallationBehavior")
	u.Exclusive = w.int(behavior, "Impact") == iiRequiresExclusiveHandling
	u.RebootFree = w.int(behavior, "RebootBehavior") == irbNeverReboots
	return u
}

// irbNeverReboots is InstallationRebootBehavior's value for an update that
// never needs a reboot.
const irbNeverReboots = 0

// iiRequiresExclusiveHandling is InstallationImpact's value for an update
// that cannot be installed in the same call as any other.
const iiRequiresExclusiveHandling = 2

// wuCalls chains IDispatch calls and keeps the first error, so the sequence
// above reads as the API's documentation does.
type wuCalls struct{ err error }

func (w *wuCalls) wrap(what string) error { return fmt.Errorf("%s: %w", what, w.err) }

func (w *wuCalls) create(progID string) *ole.IDispatch {
	if w.err != nil {
		return nil
	}
	unk, err := oleutil.CreateObject(progID)
	if err != nil {
		w.err = fmt.Errorf("%s: %w", progID, err)
		return nil
	}
	defer unk.Release()
	d, err := unk.QueryInterface(ole.IID_IDispatch)
	if err != nil {
		w.err = fmt.Errorf("%s: %w", progID, err)
	}
	return d
}

func (w *wuCalls) call(d *ole.IDispatch, name string, args ...any) *ole.IDispatch {
	return w.dispatch(d, name, func() (*ole.VARIANT, error) { return oleutil.CallMethod(d, name, args...) })
}

func (w *wuCalls) get(d *ole.IDispatch, name string, args ...any) *ole.IDispatch {
	return w.dispatch(d, name, func() (*ole.VARIANT, error) { return oleutil.GetProperty(d, name, args...) })
}

func (w *wuCalls) dispatch(d *ole.IDispatch, name string, f func() (*ole.VARIANT, error)) *ole.IDispatch {
	v := w.value(d, name, f)
	if v == nil {
		return nil
	}
	if v.VT != ole.VT_DISPATCH {
		return nil
	}
	return v.ToIDispatch()
}

func (w *wuCalls) value(d *ole.IDispatch, name string, f func() (*ole.VARIANT, error)) *ole.VARIANT {
	if w.err != nil || d == nil {
		if w.err == nil {
			w.err = fmt.Errorf("%s on a missing object", name)
		}
		return nil
	}
	v, err := f()
	if err != nil {
		w.err = fmt.Errorf("%s: %w", name, err)
		return nil
	}
	return v
}

func (w *wuCalls) put(d *ole.IDispatch, name string, val any) {
	w.value(d, name, func() (*ole.VARIANT, error) { return oleutil.PutProperty(d, name, val) })
}

func (w *wuCalls) prop(d *ole.IDispatch, name string) any {
	v := w.value(d, name, func() (*ole.VARIANT, error) { return oleutil.GetProperty(d, name) })
	if v == nil {
		return nil
	}
	return v.Value()
}

func (w *wuCalls) int(d *ole.IDispatch, name string) int { return comInt(w.prop(d, name)) }

// strItem is the string at index i of an IStringCollection (Item(i)).
func (w *wuCalls) strItem(d *ole.IDispatch, i int) string {
	v := w.value(d, "Item", func() (*ole.VARIANT, error) { return oleutil.GetProperty(d, "Item", i) })
	if v == nil {
		return ""
	}
	s, _ := v.Value().(string)
	return s
}

func (w *wuCalls) str(d *ole.IDispatch, name string) string {
	s, _ := w.prop(d, name).(string)
	return s
}

func (w *wuCalls) bool(d *ole.IDispatch, name string) bool {
	b, _ := w.prop(d, name).(bool)
	return b
}

// optBool is a boolean property an older interface may lack: false, and no
// error, when it cannot be read.
func (w *wuCalls) optBool(d *ole.IDispatch, name string) bool {
	if w.err != nil || d == nil {
		return false
	}
	v, err := oleutil.GetProperty(d, name)
	if err != nil {
		return false
	}
	b, _ := v.Value().(bool)
	return b
}

// optStrings is an IStringCollection property an older interface may
// lack: none, and no error, when it cannot be read. An update with no such
// IDs has an empty collection (MS-UAMG, IUpdate2::CveIDs).
func (w *wuCalls) optStrings(d *ole.IDispatch, name string) []string {
	if w.err != nil || d == nil {
		return nil
	}
	v, err := oleutil.GetProperty(d, name)
	if err != nil || v.VT != ole.VT_DISPATCH {
		return nil
	}
	coll := v.ToIDispatch()
	defer coll.Release()
	var own wuCalls
	var out []string
	for j := 0; j < own.int(coll, "Count") && own.err == nil; j++ {
		if s := own.strItem(coll, j); own.err == nil {
			out = append(out, s)
		}
	}
	return out
}

// time is a DATE property (VT_DATE); the zero time when it is not one.
func (w *wuCalls) time(d *ole.IDispatch, name string) time.Time {
	t, _ := w.prop(d, name).(time.Time)
	return t
}

// decimal is a DECIMAL property (comDecimal), or another number.
func (w *wuCalls) decimal(d *ole.IDispatch, name string) int64 {
	v := w.value(d, name, func() (*ole.VARIANT, error) { return oleutil.GetProperty(d, name) })
	switch {
	case v == nil:
		return 0
	case v.VT == ole.VT_DECIMAL:
		return comDecimal(*(*[16]byte)(unsafe.Pointer(v)))
	}
	return comInt64(v.Value())
}
