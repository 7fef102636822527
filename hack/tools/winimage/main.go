// Command winimage builds the node agent's Windows image without Docker and
// without pulling a base image: an OCI image layout archive (what
// `buildah push oci-archive:` and `docker buildx --output type=oci` write)
// holding one Windows base layer with winpool-agent.exe and the registry
// hives a base layer needs, for windows/amd64, with the agent as its
// entrypoint and no PATH of its own (hack/agent-image.sh, the one recipe of
// the agent's image, says why). The output depends only on its inputs: entries
// sorted, every time the given epoch, gzip without name or time.
//
//	winimage build -exe winpool-agent.exe -ref ghcr.io/winpool/agent:0.2.0 \
//	  [-label k=v]... [-env K=V]... [-epoch SECONDS] -out agent.oci.tar
//	winimage verify [-exe winpool-agent.exe] [-ref REF] [-label k=v]... agent.oci.tar
//	winimage check -platform OS/ARCH -entrypoint PATH [-user U] [-file PATH]... image.oci.tar
//
// check is the release's reading back of any image it writes (the
// operator's Linux images): the one OCI verification of the repository,
// verify its stricter form for the agent's Windows image.
//
// build verifies what it wrote before it renames it into place. -epoch
// defaults to $SOURCE_DATE_EPOCH. Import it on a Windows node with
// `ctr -n k8s.io images import --platform windows/amd64 agent.oci.tar`, or
// push it with `skopeo copy oci-archive:agent.oci.tar docker://REF`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type keyValues []string

func (k *keyValues) String() string { return strings.Join(*k, ",") }
func (k *keyValues) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q is not key=value", v)
	}
	*k = append(*k, v)
	return nil
}

func (k keyValues) toMap() map[string]string {
	if len(k) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, kv := range k {
		key, value, _ := strings.Cut(kv, "=")
		m[key] = value
	}
	return m
}

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: winimage build|verify|check [flags]"))
	}
	switch os.Args[1] {
	case "build":
		fail(build(os.Args[2:]))
	case "verify":
		fail(verifyCmd(os.Args[2:]))
	case "check":
		fail(checkCmd(os.Args[2:]))
	default:
		fail(fmt.Errorf("unknown command %q (build, verify or check)", os.Args[1]))
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "winimage:", err)
		os.Exit(1)
	}
}

func build(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	exePath := fs.String("exe", "", "the Windows executable, the image's entrypoint")
	ref := fs.String("ref", "", "image reference repository:tag (annotations for ctr import)")
	out := fs.String("out", "", "the OCI archive to write")
	epochFlag := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp, in seconds since 1970 (default $SOURCE_DATE_EPOCH)")
	var labels, env keyValues
	fs.Var(&labels, "label", "config label and manifest annotation key=value (repeatable)")
	fs.Var(&env, "env", "environment variable K=V (repeatable)")
	_ = fs.Parse(args)
	if *exePath == "" || *ref == "" || *out == "" || *epochFlag == "" || fs.NArg() != 0 {
		return fmt.Errorf("build needs -exe, -ref, -out and -epoch (or SOURCE_DATE_EPOCH)")
	}
	secs, err := strconv.ParseInt(*epochFlag, 10, 64)
	if err != nil {
		return fmt.Errorf("-epoch: %w", err)
	}
	exe, err := os.ReadFile(*exePath)
	if err != nil {
		return err
	}
	o := buildOptions{
		exeName: filepath.Base(*exePath),
		exe:     exe,
		ref:     *ref,
		labels:  labels.toMap(),
		env:     env,
		epoch:   time.Unix(secs, 0).UTC(),
	}
	archive, err := buildArchive(o)
	if err != nil {
		return err
	}
	summary, err := verify(archive, o)
	if err != nil {
		return fmt.Errorf("the image just built fails verification: %w", err)
	}
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, archive, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	fmt.Printf("%s (%d bytes)\n%s", *out, len(archive), summary)
	return nil
}

func verifyCmd(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	exePath := fs.String("exe", "", "the executable the layer must hold at Files/<name> (default: only Entrypoint and hives are checked)")
	exeName := fs.String("exe-name", "winpool-agent.exe", "the entrypoint's name, when -exe is not given")
	ref := fs.String("ref", "", "the image reference the index must name")
	var labels keyValues
	fs.Var(&labels, "label", "a label the config and manifest must carry (repeatable; all of them when given)")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("verify needs one archive")
	}
	archive, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	want := buildOptions{exeName: *exeName, ref: *ref, labels: labels.toMap()}
	if *exePath != "" {
		if want.exe, err = os.ReadFile(*exePath); err != nil {
			return err
		}
		want.exeName = filepath.Base(*exePath)
	}
	summary, err := verify(archive, want)
	if err != nil {
		return err
	}
	fmt.Printf("%s: ok\n%s", fs.Arg(0), summary)
	return nil
}
