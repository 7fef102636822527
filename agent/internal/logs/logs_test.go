package logs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Both sinks get every record: the file is what is left after the pod is gone.
func TestLogsGoToStdoutAndTheFile(t *testing.T) {
	var stdout bytes.Buffer
	dir := filepath.Join(t.TempDir(), "logs")
	log, closer := New(&stdout, dir, FileName)
	log.Info("step", "revision", "r1")
	log.Warn("cannot observe the host")
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if stdout.Len() == 0 || !bytes.Equal(file, stdout.Bytes()) {
		t.Errorf("file holds %d bytes, stdout %d: want the same records in both", len(file), stdout.Len())
	}
	if n := bytes.Count(file, []byte("\n")); n != 2 {
		t.Errorf("file holds %d records, want 2", n)
	}
}

func TestNoDirMeansStdoutOnly(t *testing.T) {
	var stdout bytes.Buffer
	log, closer := New(&stdout, "", FileName)
	log.Info("x")
	closer.Close()
	if stdout.Len() == 0 {
		t.Error("nothing on stdout")
	}
}
