package runtimeswap

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// The plan and the result file carry the revision's runtime version from the
// API across the agent's own restart (and the task's): what the agent reads
// back must be what it wrote, or the swap is judged against another version.
func FuzzReadPlan(f *testing.F) {
	f.Add([]byte(`{"revision":"r1","attempt":1,"version":"1.7.22","installDir":"C:\\Program Files\\containerd","newDir":"n","backupDir":"b",
		"resultFile":"r","services":["kubelet","containerd"],"started":"2026-12-01T06:00:00+01:00","from":"1.7.20","startWithin":30000000}`))
	f.Add([]byte(`{"revision":"r1","attempt":2,"version":"2.0.0-rc.3+azure","phase":"Succeeded","message":"ok","started":"2026-12-01T06:00:00.5Z"}`))
	dir := f.TempDir()
	in, out := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(in, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if p, err := ReadPlan(in); err == nil {
			if err := WriteJSON(out, p); err != nil {
				t.Fatalf("a plan read cannot be written: %v", err)
			}
			back, err := ReadPlan(out)
			if err != nil || !sameTime(&back.Started, p.Started) || !reflect.DeepEqual(p, back) {
				t.Fatalf("plan %+v reads back as %+v, %v", p, back, err)
			}
		}
		if r, err := ReadResult(in); err == nil {
			if err := WriteJSON(out, r); err != nil {
				t.Fatalf("a result read cannot be written: %v", err)
			}
			back, err := ReadResult(out)
			if err != nil || back.ResultFile != out {
				t.Fatalf("result %+v reads back as %+v, %v", r, back, err)
			}
			if back.ResultFile = in; !sameTime(&back.Started, r.Started) || !reflect.DeepEqual(r, back) {
				t.Fatalf("result %+v reads back as %+v", r, back)
			}
		} else if r != nil {
			t.Fatalf("a corrupt result file read as %+v", r)
		}
	})
}

// sameTime: *got is the instant want is, and takes want's zone; a time read
// in the machine's zone is written back as UTC ("Z"), the same instant.
func sameTime(got *time.Time, want time.Time) bool {
	if !got.Equal(want) {
		return false
	}
	*got = want
	return true
}
