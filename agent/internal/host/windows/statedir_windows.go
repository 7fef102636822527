//go:build windows

package windows

import (
	"errors"
	"fmt"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/windows"
)

// CreateFolder, FileSecurity and SetFolderDACL are System's calls on files
// (system.go); what the agent does with them is statedir.go's.

func (winSystem) CreateFolder(dir, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", sddl, err)
	}
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return err
	}
	sa := windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(sa))
	if err := windows.CreateDirectory(p, &sa); err != nil {
		if errors.Is(err, windows.ERROR_ALREADY_EXISTS) {
			return ErrExists
		}
		return err
	}
	return nil
}

func (winSystem) FileSecurity(path string) (EntrySecurity, fs.FileMode, error) {
	s, mode, err := readEntry(path)
	if errors.Is(err, windows.ERROR_FILE_NOT_FOUND) || errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
		return s, mode, fs.ErrNotExist
	}
	return s, mode, err
}

func (winSystem) SetFolderDACL(dir, sddl string) error {
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", sddl, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("the DACL of %s: %w", sddl, err)
	}
	return windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
}

// readEntry reads the owner and DACL of a file or folder, and whether it is
// a folder, a file or a reparse point, from the entry itself: a symbolic
// link or a junction is opened, not followed.
func readEntry(path string) (EntrySecurity, fs.FileMode, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return EntrySecurity{}, 0, err
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL|windows.FILE_READ_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING,
		windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return EntrySecurity{}, 0, err
	}
	defer windows.CloseHandle(h)
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &info); err != nil {
		return EntrySecurity{}, 0, err
	}
	mode := entryMode(info.FileAttributes)
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return EntrySecurity{}, mode, err
	}
	s, err := security(sd)
	return s, mode, err
}

// security is the part of a security descriptor statedir.go decides on.
func security(sd *windows.SECURITY_DESCRIPTOR) (EntrySecurity, error) {
	var s EntrySecurity
	owner, _, err := sd.Owner()
	if err != nil {
		return s, fmt.Errorf("reading the owner: %w", err)
	}
	if owner != nil {
		s.OwnerSID, s.OwnerAccount = owner.String(), account(owner)
	}
	control, _, err := sd.Control()
	if err != nil {
		return s, fmt.Errorf("reading the security descriptor's control bits: %w", err)
	}
	s.Protected = control&windows.SE_DACL_PROTECTED != 0
	dacl, _, err := sd.DACL()
	if errors.Is(err, windows.ERROR_OBJECT_NOT_FOUND) || (err == nil && dacl == nil) {
		s.NullDACL = true
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading the DACL: %w", err)
	}
	for i := uint16(0); i < dacl.AceCount; i++ {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, uint32(i), &ace); err != nil {
			return s, fmt.Errorf("reading entry %d of the DACL: %w", i, err)
		}
		e := ACE{Type: ace.Header.AceType, Mask: uint32(ace.Mask)}
		// Allowed and denied ACEs hold the SID right after the mask; other
		// types (object, callback ACEs) are laid out differently and are
		// refused by type alone.
		if e.Type == ACEAllow || e.Type == ACEDeny {
			sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
			e.SID = sid.String()
			if !trustedSID(e.SID) { // named only in an error
				e.Account = account(sid)
			}
		}
		s.ACEs = append(s.ACEs, e)
	}
	return s, nil
}

// account is DOMAIN\name of sid, "" when it cannot be looked up.
func account(sid *windows.SID) string {
	name, domain, _, err := sid.LookupAccount("")
	switch {
	case err != nil:
		return ""
	case domain == "":
		return name
	}
	return domain + `\` + name
}
