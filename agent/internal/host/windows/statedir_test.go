package windows

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

const userSID = "S-1-5-21-3623811015-3361044348-30300820-1013"

func TestStateFolderSDDL(t *testing.T) {
	// Protected (D:P), and nothing but full control for SYSTEM and
	// Administrators, inherited by folders and files below.
	m := regexp.MustCompile(`^D:P((?:\([^)]*\))+)$`).FindStringSubmatch(stateFolderSDDL)
	if m == nil {
		t.Fatalf("%s is not a protected DACL", stateFolderSDDL)
	}
	aces := strings.Split(strings.Trim(m[1], "()"), ")(")
	if want := []string{"A;OICI;FA;;;SY", "A;OICI;FA;;;BA"}; !reflect.DeepEqual(aces, want) {
		t.Errorf("ACEs %q, want %q", aces, want)
	}
}

func TestStateFolders(t *testing.T) {
	root := filepath.Join("C:", "ProgramData", "winpool")
	want := []string{root, filepath.Join(root, "logs"), filepath.Join(root, "runtime"), filepath.Join(root, "servicing"), filepath.Join(root, "updates")}
	if got := stateFolders(root); !reflect.DeepEqual(got, want) {
		t.Errorf("stateFolders = %q, want %q (the state folder first)", got, want)
	}
}

func TestTrustedSID(t *testing.T) {
	for sid, want := range map[string]bool{
		"S-1-5-18":                       true,  // SYSTEM
		"S-1-5-32-544":                   true,  // BUILTIN\Administrators
		"s-1-5-18":                       true,  // the same SID
		"S-1-5-32-545":                   false, // BUILTIN\Users
		"S-1-5-11":                       false, // Authenticated Users
		"S-1-1-0":                        false, // Everyone
		"S-1-3-0":                        false, // CREATOR OWNER
		"S-1-5-19":                       false, // LOCAL SERVICE
		"S-1-5-20":                       false, // NETWORK SERVICE
		userSID:                          false, // a local user
		userSID[:len(userSID)-4] + "500": false, // the local Administrator account is not the group
		"S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464": false, // TrustedInstaller
		"S-1-5-18-1":    false,
		"S-1-5-32-5440": false,
		"":              false,
	} {
		if got := trustedSID(sid); got != want {
			t.Errorf("trustedSID(%q) = %v, want %v", sid, got, want)
		}
	}
}

func TestCheckOwner(t *testing.T) {
	const dir = `C:\ProgramData\winpool`
	for _, c := range []struct {
		name  string
		s     EntrySecurity
		words []string // nil: no error
	}{
		{"SYSTEM", EntrySecurity{OwnerSID: "S-1-5-18", OwnerAccount: `NT AUTHORITY\SYSTEM`}, nil},
		{"Administrators", EntrySecurity{OwnerSID: "S-1-5-32-544"}, nil},
		{"a user who created it first", EntrySecurity{OwnerSID: userSID, OwnerAccount: `WIN-NODE1\bob`},
			[]string{dir, userSID + ` (WIN-NODE1\bob)`, "not by SYSTEM (S-1-5-18) or Administrators (S-1-5-32-544)", "will not use it",
				"Delete it as an administrator", `Remove-Item -Recurse -Force '` + dir + `'`}},
		{"an owner without a name", EntrySecurity{OwnerSID: "S-1-5-32-545"}, []string{"owned by S-1-5-32-545, not"}},
		{"no owner", EntrySecurity{}, []string{"owned by no one"}},
	} {
		err := checkOwner(dir, c.s)
		wantRefusal(t, c.name, err, c.words)
	}
}

func TestCheckDACL(t *testing.T) {
	const dir = `C:\ProgramData\winpool\runtime`
	const (
		readExecute  = 0x1200a9   // what BUILTIN\Users has on containerd's binaries in Program Files
		createFiles  = 0x116      // BUILTIN\Users on %ProgramData% and what inherits it: add files and folders, write attributes
		fullControl  = 0x1f01ff   // FA
		genericAll   = 0x10000000 // CREATOR OWNER's inherit-only entry
		genericRX    = 0xa0000000 // GR|GX
		genericWrite = 0x40000000
		writeDAC     = 0x40000
	)
	ours := []ACE{{Type: ACEAllow, Mask: fullControl, SID: "S-1-5-18"}, {Type: ACEAllow, Mask: fullControl, SID: "S-1-5-32-544"}}
	plus := func(e ACE) []ACE { return append(append([]ACE{}, ours...), e) }
	users := func(mask uint32) ACE {
		return ACE{Type: ACEAllow, Mask: mask, SID: "S-1-5-32-545", Account: `BUILTIN\Users`}
	}
	for _, c := range []struct {
		name  string
		s     EntrySecurity
		own   bool
		words []string // nil: no error
	}{
		{"the state folder's DACL", EntrySecurity{Protected: true, ACEs: ours}, true, nil},
		{"an empty DACL grants no one", EntrySecurity{Protected: true}, true, nil},
		{"still inheriting after the agent set it", EntrySecurity{ACEs: ours}, true, []string{dir, "still inherits"}},
		{"the agent's folder grants Users read", EntrySecurity{Protected: true, ACEs: plus(users(readExecute))}, true,
			[]string{dir + ` grants access to S-1-5-32-545 (BUILTIN\Users)`, "only SYSTEM and Administrators"}},
		{"a deny entry takes nothing away", EntrySecurity{Protected: true, ACEs: plus(ACE{Type: ACEDeny, Mask: fullControl, SID: "S-1-1-0"})}, true, nil},
		{"inherited from the state folder", EntrySecurity{ACEs: ours}, false, nil},
		{"a moved binary Users may run", EntrySecurity{ACEs: plus(users(readExecute))}, false, nil},
		{"generic read and execute", EntrySecurity{ACEs: plus(users(genericRX))}, false, nil},
		{"ProgramData's create-files entry", EntrySecurity{ACEs: plus(users(createFiles))}, false,
			[]string{dir + ` lets S-1-5-32-545 (BUILTIN\Users) change it (access mask 0x116)`, "only SYSTEM and Administrators"}},
		{"CREATOR OWNER", EntrySecurity{ACEs: plus(ACE{Type: ACEAllow, Mask: genericAll, SID: "S-1-3-0"})}, false, []string{"lets S-1-3-0 change it"}},
		{"a user, first", EntrySecurity{ACEs: []ACE{{Type: ACEAllow, Mask: fullControl, SID: userSID}}}, false, []string{userSID}},
		{"generic write", EntrySecurity{ACEs: plus(users(genericWrite))}, false, []string{"access mask 0x40000000"}},
		{"change permissions alone", EntrySecurity{ACEs: plus(users(writeDAC))}, false, []string{"access mask 0x40000"}},
		{"no DACL", EntrySecurity{NullDACL: true, Protected: true}, true, []string{"has no DACL", "everyone has full control"}},
		{"no DACL below", EntrySecurity{NullDACL: true}, false, []string{"has no DACL"}},
		{"an object ACE", EntrySecurity{ACEs: plus(ACE{Type: 5})}, false, []string{"type 5"}},
	} {
		err := checkDACL(dir, c.s, c.own)
		wantRefusal(t, c.name, err, c.words)
	}
}

func TestMovedFromContainerd(t *testing.T) {
	root := filepath.Join(string(filepath.Separator)+"ProgramData", "winpool")
	for rel, want := range map[string]bool{
		"runtime/r1-1/old/containerd.exe": true,
		"RUNTIME/r1-1/Old/ctr.exe":        true, // Windows names are not case-sensitive
		"runtime/r1-1/old":                false,
		"runtime/r1-1/old/sub/ctr.exe":    false,
		"runtime/r1-1/new/containerd.exe": false,
		"runtime/r1-1/winpool-agent.exe":  false,
		"runtime/old/containerd.exe":      false,
		"updates/r1/old/kb.msu":           false,
		"../runtime/r1-1/old/x.exe":       false,
		"runtime/../old/x/y":              false,
		".":                               false,
	} {
		if got := movedFromContainerd(root, filepath.Join(root, filepath.FromSlash(rel))); got != want {
			t.Errorf("movedFromContainerd(%s) = %v, want %v", rel, got, want)
		}
	}
	if movedFromContainerd(root, filepath.Join(string(filepath.Separator)+"elsewhere", "runtime", "r1-1", "old", "containerd.exe")) {
		t.Error("a path outside the state folder counts as moved from containerd")
	}
}

func TestCheckEntryType(t *testing.T) {
	for _, c := range []struct {
		mode    fs.FileMode
		wantDir bool
		word    string // "": no error
	}{
		{0, false, ""},
		{fs.ModeDir, false, ""},
		{fs.ModeDir, true, ""},
		{0o644, false, ""}, // permission bits are not a type
		{0, true, "is a file, not a folder"},
		{fs.ModeSymlink, false, "symbolic link"},
		{fs.ModeSymlink, true, "symbolic link"},
		{fs.ModeIrregular, true, "junction"},              // a junction, as Go reports it on Windows
		{fs.ModeDir | fs.ModeIrregular, true, "junction"}, // whatever else a reparse point says
		{fs.ModeNamedPipe, false, "named pipe"},
		{fs.ModeDevice | fs.ModeCharDevice, false, "device"},
		{fs.ModeSocket, false, "socket"},
	} {
		err := checkEntryType(`C:\ProgramData\winpool\x`, c.mode, c.wantDir)
		switch {
		case c.word == "" && err != nil:
			t.Errorf("%v (dir %v): %v, want none", c.mode, c.wantDir, err)
		case c.word != "" && (err == nil || !strings.Contains(err.Error(), c.word) || !strings.Contains(err.Error(), `C:\ProgramData\winpool\x`)):
			t.Errorf("%v (dir %v): %v, want an error naming the path and %q", c.mode, c.wantDir, err, c.word)
		}
	}
}

func TestCheckStateTree(t *testing.T) {
	trusted := EntrySecurity{OwnerSID: "S-1-5-18", ACEs: []ACE{{Type: ACEAllow, SID: "S-1-5-18"}, {Type: ACEAllow, SID: "S-1-5-32-544"}}}
	for _, c := range []struct {
		name string
		// change alters the laid-out tree and the security read of its paths.
		change func(t *testing.T, root string, sec map[string]EntrySecurity, fail map[string]error)
		words  []string // nil: no error
		// ownersOnly: the walk before the agent sets any permission, which
		// leaves the DACLs an older agent's folder inherited to after.
		ownersOnly bool
	}{
		{"every entry the agent's", func(*testing.T, string, map[string]EntrySecurity, map[string]error) {}, nil, false},
		{"a file planted in a sub-folder", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "runtime", "r2-1", "winpool-agent.exe")
			write(t, p)
			sec[p] = EntrySecurity{OwnerSID: userSID, ACEs: trusted.ACEs}
		}, []string{filepath.Join(root0, "runtime", "r2-1", "winpool-agent.exe") + " is owned by " + userSID}, false},
		{"a squatted state folder", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			sec[root] = EntrySecurity{OwnerSID: userSID}
		}, []string{root0 + " is owned by " + userSID}, false},
		{"a link", func(t *testing.T, root string, _ map[string]EntrySecurity, _ map[string]error) {
			if err := os.Symlink(filepath.Join(root, "..", "elsewhere"), filepath.Join(root, "runtime", "r2-1")); err != nil {
				t.Fatal(err)
			}
		}, []string{filepath.Join(root0, "runtime", "r2-1") + " is a symbolic link"}, false},
		{"Users may add files to a folder", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "updates")
			sec[p] = EntrySecurity{OwnerSID: "S-1-5-18", ACEs: append(append([]ACE{}, trusted.ACEs...), ACE{Type: ACEAllow, Mask: 0x116, SID: "S-1-5-32-545"})}
		}, []string{filepath.Join(root0, "updates") + " lets S-1-5-32-545 change it"}, false},
		{"before the agent sets permissions, an older agent's inherited ones pass", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "updates")
			sec[p] = EntrySecurity{OwnerSID: "S-1-5-18", ACEs: append(append([]ACE{}, trusted.ACEs...), ACE{Type: ACEAllow, Mask: 0x116, SID: "S-1-5-32-545"})}
		}, nil, true},
		{"but not what someone else planted there", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "runtime", "r2-1", "new", "containerd.exe")
			write(t, p)
			sec[p] = EntrySecurity{OwnerSID: userSID}
		}, []string{filepath.Join(root0, "runtime", "r2-1", "new", "containerd.exe") + " is owned by " + userSID}, true},
		{"nor a link", func(t *testing.T, root string, _ map[string]EntrySecurity, _ map[string]error) {
			if err := os.Symlink(filepath.Join(root, "..", "elsewhere"), filepath.Join(root, "logs", "winpool-agent.log.1")); err != nil {
				t.Fatal(err)
			}
		}, []string{filepath.Join(root0, "logs", "winpool-agent.log.1") + " is a symbolic link"}, true},
		{"an entry that cannot be read", func(t *testing.T, root string, _ map[string]EntrySecurity, fail map[string]error) {
			fail[filepath.Join(root, "state.json")] = errors.New("Access is denied.")
		}, []string{"reading the owner and permissions of " + filepath.Join(root0, "state.json"), "Access is denied."}, false},
		{"a binary moved out of containerd's folder keeps its owner", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "runtime", "r1-1", "old", "containerd.exe")
			write(t, p)
			sec[p] = EntrySecurity{OwnerSID: userSID, ACEs: append(append([]ACE{}, trusted.ACEs...), ACE{Type: ACEAllow, Mask: 0x1200a9, SID: "S-1-5-32-545"})}
		}, nil, false},
		{"but one others may change is refused", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "runtime", "r1-1", "old", "containerd.exe")
			write(t, p)
			sec[p] = EntrySecurity{OwnerSID: userSID, ACEs: []ACE{{Type: ACEAllow, Mask: 0x1f01ff, SID: userSID}}}
		}, []string{filepath.Join(root0, "runtime", "r1-1", "old", "containerd.exe") + " lets " + userSID + " change it"}, false},
		{"and a squatted old folder is refused", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "runtime", "r2-1", "old")
			write(t, filepath.Join(p, "ctr.exe"))
			sec[p] = EntrySecurity{OwnerSID: userSID, ACEs: trusted.ACEs}
		}, []string{filepath.Join(root0, "runtime", "r2-1", "old") + " is owned by " + userSID}, false},
		{"as is a squatted folder inside old", func(t *testing.T, root string, sec map[string]EntrySecurity, _ map[string]error) {
			p := filepath.Join(root, "runtime", "r1-1", "old", "sub")
			write(t, filepath.Join(p, "ctr.exe"))
			sec[p] = EntrySecurity{OwnerSID: userSID, ACEs: trusted.ACEs}
		}, []string{filepath.Join(root0, "runtime", "r1-1", "old", "sub") + " is owned by " + userSID}, false},
		{"an entry gone before it is read", func(t *testing.T, root string, _ map[string]EntrySecurity, fail map[string]error) {
			fail[filepath.Join(root, "runtime", "result.json")] = fmt.Errorf("open: %w", fs.ErrNotExist)
		}, nil, false},
		{"the state folder is a file", func(t *testing.T, root string, _ map[string]EntrySecurity, _ map[string]error) {
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
			write(t, root)
		}, []string{root0 + " is a file, not a folder"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "winpool")
			for _, p := range []string{"state.json", "logs/winpool-agent.log", "runtime/result.json", "runtime/r1-1/new/containerd.exe", "updates/r1/01/kb.msu"} {
				write(t, filepath.Join(root, filepath.FromSlash(p)))
			}
			sec, fail := map[string]EntrySecurity{}, map[string]error{}
			c.change(t, root, sec, fail)
			var read []string
			err := checkStateTree(root, func(p string) (EntrySecurity, error) {
				read = append(read, p)
				if err := fail[p]; err != nil {
					return EntrySecurity{}, err
				}
				if s, ok := sec[p]; ok {
					return s, nil
				}
				return trusted, nil
			}, !c.ownersOnly)
			if c.words == nil {
				if err != nil {
					t.Fatalf("%v, want none", err)
				}
				if len(read) < 13 { // the state folder, 5 files and 7 folders below it
					t.Errorf("read %d entries, want all 13: %q", len(read), read)
				}
				return
			}
			if err == nil {
				t.Fatal("no error, want a refusal")
			}
			msg := strings.ReplaceAll(err.Error(), base, "")
			for _, w := range c.words {
				if !strings.Contains(msg, strings.ReplaceAll(w, base, "")) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
		})
	}
}

// root0 stands for the test's state folder in the expected messages; the
// test strips the temporary folder above it from both.
var root0 = string(filepath.Separator) + "winpool"

func write(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(p), 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantRefusal: err is nil when words is, else an error holding every word.
func wantRefusal(t *testing.T, name string, err error, words []string) {
	t.Helper()
	switch {
	case words == nil && err != nil:
		t.Errorf("%s: %v, want none", name, err)
	case words != nil && err == nil:
		t.Errorf("%s: no error, want a refusal", name)
	case err != nil:
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", name, err, w)
			}
		}
	}
}

func TestEntryMode(t *testing.T) {
	for _, tc := range []struct {
		attributes uint32
		want       fs.FileMode
	}{
		{0x20, 0},                 // an archive-flagged file
		{0x10, fs.ModeDir},        // a folder
		{0x410, fs.ModeIrregular}, // a junction: a folder and a reparse point
		{0x420, fs.ModeIrregular}, // a symbolic link to a file
		{0x80 | 0x10, fs.ModeDir}, // a "normal" folder
	} {
		if got := entryMode(tc.attributes); got != tc.want {
			t.Errorf("attributes %#x: %v, want %v", tc.attributes, got, tc.want)
		}
	}
}
