package windows

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The agent's state folder (%ProgramData%\winpool) holds what a SYSTEM
// scheduled task runs and what it installs (the task's copy of the agent,
// the plan, the new containerd binaries, the update packages).
// %ProgramData% lets BUILTIN\Users create files and folders, and whoever
// creates a folder owns it: a folder a user created before the agent did,
// or one that inherited ProgramData's ACL, would let that user plant or
// swap a binary SYSTEM then runs. So the agent gives the folder its own ACL
// and refuses a folder someone else owns. The decisions are here, tested on
// Linux over a fake machine; the calls are System's (statedir_windows.go).

// stateFolderSDDL is the state folder's DACL: protected (P: nothing
// inherited from %ProgramData%), full control (FA) for SYSTEM (SY) and
// BUILTIN\Administrators (BA) only, inherited by every folder (CI) and file
// (OI) below it. No owner is set: the folder keeps the one Windows gives the
// agent's token (SYSTEM, or Administrators for an elevated administrator),
// which secureStateDir checks.
const stateFolderSDDL = "D:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"

const (
	sidSystem         = "S-1-5-18"
	sidAdministrators = "S-1-5-32-544"
)

// stateSubfolders are the folders the agent creates directly under the
// state folder, each given stateFolderSDDL like the state folder itself;
// what is created deeper inherits it.
var stateSubfolders = []string{"logs", "runtime", "servicing", "updates"}

// stateFolders is the state folder and its own sub-folders, in the order
// they are secured: the state folder first, so that a squatted one is
// refused before anything inside it is looked at.
func stateFolders(root string) []string {
	dirs := []string{root}
	for _, s := range stateSubfolders {
		dirs = append(dirs, filepath.Join(root, s))
	}
	return dirs
}

// EntrySecurity is what the agent reads from the security descriptor of a
// file or folder in the state folder.
type EntrySecurity struct {
	// OwnerSID is the owner in string form (S-1-5-18); OwnerAccount its
	// account name (NT AUTHORITY\SYSTEM), "" when it could not be looked up.
	OwnerSID, OwnerAccount string
	// NullDACL: no DACL at all, which grants everyone everything.
	NullDACL bool
	// Protected: the DACL inherits nothing from the parent folder.
	Protected bool
	ACEs      []ACE
}

// ACE is one entry of a DACL.
type ACE struct {
	// Type is the ACE type: ACEAllow, ACEDeny or another (object and
	// callback ACEs, whose SID is not read).
	Type uint8
	// Mask is the access the entry allows or denies.
	Mask uint32
	// SID and Account name whom the entry is for.
	SID, Account string
}

const (
	ACEAllow uint8 = 0 // ACCESS_ALLOWED_ACE_TYPE
	ACEDeny  uint8 = 1 // ACCESS_DENIED_ACE_TYPE
)

// changeRights are the access rights that let their holder change a file or
// folder, or what a folder holds: write or append data (add a file or a
// sub-folder), write extended attributes or attributes, delete a child,
// delete, change the DACL, take ownership, and the generic rights holding
// them. Read and execute (BUILTIN\Users has them on containerd's own
// binaries) change nothing.
const changeRights uint32 = 0x2 | 0x4 | 0x10 | 0x40 | 0x100 | // FILE_WRITE_DATA, FILE_APPEND_DATA, FILE_WRITE_EA, FILE_DELETE_CHILD, FILE_WRITE_ATTRIBUTES
	0x10000 | 0x40000 | 0x80000 | // DELETE, WRITE_DAC, WRITE_OWNER
	0x1000000 | 0x2000000 | 0x10000000 | 0x40000000 // ACCESS_SYSTEM_SECURITY, MAXIMUM_ALLOWED, GENERIC_ALL, GENERIC_WRITE

// trustedSID reports whether sid is SYSTEM or BUILTIN\Administrators, the
// only accounts that may own the state folder or anything in it, or be
// granted access to it.
func trustedSID(sid string) bool {
	return strings.EqualFold(sid, sidSystem) || strings.EqualFold(sid, sidAdministrators)
}

func named(sid, account string) string {
	if account == "" {
		return sid
	}
	return fmt.Sprintf("%s (%s)", sid, account)
}

// checkOwner refuses a file or folder in the state folder that neither
// SYSTEM nor Administrators owns: someone else created it before the agent
// did, and its owner can always change its ACL back.
func checkOwner(path string, s EntrySecurity) error {
	if trustedSID(s.OwnerSID) {
		return nil
	}
	owner := named(s.OwnerSID, s.OwnerAccount)
	if s.OwnerSID == "" {
		owner = "no one"
	}
	return fmt.Errorf("%s is owned by %s, not by SYSTEM (%s) or Administrators (%s): someone created it before the agent did "+
		"(anyone may create folders in %%ProgramData%%), and may have put files there that the agent would run or install as SYSTEM, "+
		"so the agent will not use it. Delete it as an administrator (Remove-Item -Recurse -Force '%s') and restart the agent's pod",
		path, owner, sidSystem, sidAdministrators, path)
}

// checkDACL refuses a file or folder that has no DACL, or holds entries
// the agent does not read, or lets anyone but SYSTEM and Administrators
// change it. own is a folder the agent has just given stateFolderSDDL: its
// DACL must be protected and grant no one else anything at all. Below
// those, what a folder inherits from them grants no one else either, but a
// binary the containerd upgrade moved out of containerd's folder into old\
// keeps that folder's explicit entries, such as read and execute for
// BUILTIN\Users, which change nothing.
func checkDACL(path string, s EntrySecurity, own bool) error {
	fix := fmt.Sprintf("only SYSTEM and Administrators may change what the agent's state folder holds; delete %s as an administrator and restart the agent's pod", path)
	if s.NullDACL {
		return fmt.Errorf("%s has no DACL (everyone has full control): %s", path, fix)
	}
	if own && !s.Protected {
		return fmt.Errorf("%s still inherits its permissions from its parent folder after the agent protected them: %s", path, fix)
	}
	for _, a := range s.ACEs {
		switch {
		case a.Type == ACEDeny:
		case a.Type != ACEAllow:
			return fmt.Errorf("%s has a permission entry of type %d, which the agent does not expect: %s", path, a.Type, fix)
		case trustedSID(a.SID):
		case own:
			return fmt.Errorf("%s grants access to %s: %s", path, named(a.SID, a.Account), fix)
		case a.Mask&changeRights != 0:
			return fmt.Errorf("%s lets %s change it (access mask 0x%x): %s", path, named(a.SID, a.Account), a.Mask, fix)
		}
	}
	return nil
}

// movedFromContainerd reports whether path is a binary the containerd
// upgrade task moved out of containerd's folder (<root>\runtime\<revision>-
// <attempt>\old\<file>): it keeps the owner it had there, whoever installed
// containerd, who owned the same binary in containerd's folder (and the
// task puts it back there on a rollback).
func movedFromContainerd(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	return len(parts) == 4 && strings.EqualFold(parts[0], "runtime") && parts[1] != ".." && strings.EqualFold(parts[2], "old")
}

// checkEntryType refuses what the agent never creates in its state folder:
// symbolic links, junctions and other reparse points (which would send the
// agent's writes, or the task's reads, somewhere else), devices and pipes;
// and a file where a folder must be. Only plain files and folders pass.
func checkEntryType(path string, mode fs.FileMode, wantDir bool) error {
	t := mode.Type()
	switch {
	case t == fs.ModeDir:
		return nil
	case t == 0 && !wantDir:
		return nil
	case t == 0:
		return fmt.Errorf("%s is a file, not a folder: delete it as an administrator and restart the agent's pod", path)
	default:
		return fmt.Errorf("%s is a %s, not a plain file or folder (the agent creates no links): someone else created it; "+
			"delete it as an administrator and restart the agent's pod", path, kind(t))
	}
}

func kind(t fs.FileMode) string {
	switch {
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeIrregular != 0:
		return "junction or other reparse point"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// checkStateTree walks the state folder (not following links) and returns
// the first entry that is not a plain file or folder, is not owned by SYSTEM
// or Administrators (but movedFromContainerd), or (withDACL) lets anyone
// else change it. read returns an entry's security without following a link (on
// Windows, the entry is opened with FILE_FLAG_OPEN_REPARSE_POINT). An entry
// gone by the time it is read (a containerd upgrade task still running
// renames its files; a servicing task renames its result into place) is
// skipped.
func checkStateTree(root string, read func(path string) (EntrySecurity, error), withDACL bool) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil && path != root && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("checking the agent's state folder %s: %w", root, err)
		}
		if err := checkEntryType(path, d.Type(), path == root); err != nil {
			return err
		}
		s, err := read(path)
		if err != nil && path != root && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the owner and permissions of %s: %w (delete it as an administrator if the agent cannot read it)", path, err)
		}
		if d.IsDir() || !movedFromContainerd(root, path) {
			if err := checkOwner(path, s); err != nil {
				return err
			}
		}
		if !withDACL {
			return nil
		}
		return checkDACL(path, s, false)
	})
}

// secureStateDir creates the agent's state folder and its sub-folders with
// stateFolderSDDL, or gives them that DACL when they already exist (an
// older agent created them with %ProgramData%'s inherited ACL; setting a
// folder's DACL also replaces what everything below it inherited), then
// checks every file and folder in it. Nothing is changed in a folder that
// already exists before everything in it is known to be a plain file or
// folder SYSTEM or Administrators own: a folder someone else owns is
// refused as it is, and no permission is set through a link.
func secureStateDir(sys System, root string) error {
	read := func(path string) (EntrySecurity, error) {
		s, _, err := sys.FileSecurity(path)
		return s, err
	}
	if _, err := os.Lstat(root); err == nil {
		if err := checkStateTree(root, read, false); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return err
	}
	for _, dir := range stateFolders(root) {
		if err := secureFolder(sys, dir); err != nil {
			return err
		}
	}
	return checkStateTree(root, read, true)
}

func secureFolder(sys System, dir string) error {
	if err := sys.CreateFolder(dir, stateFolderSDDL); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("creating the agent's state folder %s: %w", dir, err)
	}
	// Before its DACL is set: a plain folder (setting the DACL of a junction
	// would change its target's) that SYSTEM or Administrators own.
	s, mode, err := sys.FileSecurity(dir)
	if err != nil {
		return fmt.Errorf("reading the owner of %s: %w (delete it as an administrator if the agent cannot read it)", dir, err)
	}
	if err := checkEntryType(dir, mode, true); err != nil {
		return err
	}
	if err := checkOwner(dir, s); err != nil {
		return err
	}
	if err := sys.SetFolderDACL(dir, stateFolderSDDL); err != nil {
		return fmt.Errorf("setting the permissions of %s to %s: %w", dir, stateFolderSDDL, err)
	}
	if s, _, err = sys.FileSecurity(dir); err != nil {
		return fmt.Errorf("reading the permissions of %s back: %w", dir, err)
	}
	if err := checkOwner(dir, s); err != nil {
		return err
	}
	return checkDACL(dir, s, true)
}

// File attributes (FILE_ATTRIBUTE_*) entryMode tells apart.
const (
	fileAttributeDirectory    = 0x10
	fileAttributeReparsePoint = 0x400
)

// entryMode is what FileSecurity says a file's attributes make it: a
// reparse point (a symbolic link or junction, which the checks never
// follow) before a folder.
func entryMode(attributes uint32) fs.FileMode {
	switch {
	case attributes&fileAttributeReparsePoint != 0:
		return fs.ModeIrregular
	case attributes&fileAttributeDirectory != 0:
		return fs.ModeDir
	}
	return 0
}
