package stage

import (
	"io"
	"io/fs"
	"os"
)

// WriteFile writes r to dest with perm. exclusive refuses to replace a file
// that exists (the containerd swap never overwrites what it installs over a
// moved-aside binary); otherwise dest is replaced.
func WriteFile(dest string, r io.Reader, perm fs.FileMode, exclusive bool) error {
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if exclusive {
		flag = os.O_CREATE | os.O_WRONLY | os.O_EXCL
	}
	out, err := os.OpenFile(dest, flag, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// CopyFile copies src to dest with WriteFile's rules.
func CopyFile(src, dest string, perm fs.FileMode, exclusive bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return WriteFile(dest, in, perm, exclusive)
}
