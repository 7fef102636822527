package fakewin

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"winpool.dev/agent/internal/host/windows"
)

// processes is the machine's process table as Toolhelp lists it: each
// running service's program (under nssm.exe for an NSSM service, under its
// host program for a wrapped one), the programs a service starts as its
// children, and, where kube-proxy runs in a HostProcess pod
// (Options.KubeProxyInPod), kube-proxy.exe under the script its container
// runs, under containerd's shim. A process gets a PID when it starts; one
// started again gets a new one. Only the pod's kube-proxy can be ended: the
// kubelet starts its container again, and kube-proxy programs HNS anew.
type processes struct{ m *Machine }

const (
	pidSystem   = 4
	pidServices = 700
)

// pidLocked is the PID of the process key names, handed out at its first
// sight. m.mu held.
func (m *Machine) pidLocked(key string) uint32 {
	if pid, ok := m.pids[key]; ok {
		return pid
	}
	m.nextPID += 4
	m.pids[key] = m.nextPID
	return m.nextPID
}

func image(program string) string { return path.Base(strings.ReplaceAll(program, `\`, "/")) }

func (p processes) List() ([]windows.Process, error) {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []windows.Process{{PID: pidSystem, Image: "System"}, {PID: pidServices, ParentPID: pidSystem, Image: "services.exe"}}
	var containerd uint32
	for _, name := range slices.Sorted(maps.Keys(m.services)) {
		s := m.services[name]
		if !s.running {
			continue
		}
		parent := uint32(pidServices)
		wrapper := ""
		switch {
		case s.NSSM:
			wrapper = "nssm.exe"
		case s.Host != "":
			wrapper = image(s.Host)
		}
		if wrapper != "" {
			parent = m.pidLocked("wrapper:" + name)
			out = append(out, windows.Process{PID: parent, ParentPID: pidServices, Image: wrapper})
		}
		pid := m.pidLocked("service:" + name)
		out = append(out, windows.Process{PID: pid, ParentPID: parent, Image: image(s.Program)})
		if name == "containerd" {
			containerd = pid
		}
		for _, child := range slices.Sorted(maps.Keys(s.Children)) {
			c := windows.Process{PID: m.pidLocked("child:" + name + "/" + child), ParentPID: pid, Image: image(s.Children[child])}
			out = append(out, c)
			if child == "containerd" {
				containerd = c.PID
			}
		}
	}
	if m.o.KubeProxyInPod && containerd != 0 {
		shim, script := m.pidLocked("pod-shim"), m.pidLocked("pod-script")
		out = append(out, windows.Process{PID: shim, ParentPID: containerd, Image: "containerd-shim-runhcs-v1.exe"},
			windows.Process{PID: script, ParentPID: shim, Image: "powershell.exe"})
		if !m.podProxyDown {
			out = append(out, windows.Process{PID: m.pidLocked("pod-kube-proxy"), ParentPID: script, Image: "kube-proxy.exe"})
		}
	}
	return out, nil
}

// forgetServiceLocked drops the PIDs of a service's processes, which ended
// with it. m.mu held.
func (m *Machine) forgetServiceLocked(name string) {
	for key := range m.pids {
		if key == "wrapper:"+name || key == "service:"+name || strings.HasPrefix(key, "child:"+name+"/") {
			delete(m.pids, key)
		}
	}
}

func (p processes) Terminate(pid uint32) error {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.o.KubeProxyInPod || m.podProxyDown || m.pids["pod-kube-proxy"] != pid {
		return fmt.Errorf("TerminateProcess(%d): only a pod's kube-proxy.exe is ended on this machine", pid)
	}
	delete(m.pids, "pod-kube-proxy")
	m.podProxyDown = true
	boot := m.bootCtx
	time.AfterFunc(cmp.Or(m.o.KubeProxyPodRestart, time.Second), func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		// A boot meanwhile started it with the machine.
		if boot.Err() != nil || !m.podProxyDown {
			return
		}
		m.podProxyDown = false
		m.pidLocked("pod-kube-proxy")
		m.kubeProxyStarted = time.Now()
	})
	return nil
}
