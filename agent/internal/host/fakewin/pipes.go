package fakewin

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The machine's named pipes: CSI Proxy's, while a CSI Proxy service runs,
// and containerd's, where a CRI server answers while containerd runs (its
// service, or the service that runs it as a child), as the kubelet and the
// agent dial them.

const containerdPipe = `\\.\pipe\containerd-containerd`

func (m *Machine) dialPipe(ctx context.Context, pipe string) (net.Conn, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case strings.EqualFold(pipe, containerdPipe):
		if s, _ := m.runtime(); s != nil && s.running {
			return m.criPipe().dial()
		}
	case strings.Contains(pipe, `\csi-proxy-`):
		for _, s := range m.services {
			if strings.Contains(strings.ToLower(s.Name), "csi") && s.running {
				a, b := net.Pipe()
				go func() { b.Close() }()
				return a, nil
			}
		}
	}
	return nil, fmt.Errorf("open %s: The system cannot find the file specified", pipe)
}

// criPipe is containerd's CRI server, started at its first dial. m.mu held.
func (m *Machine) criPipe() *pipeListener {
	if m.cri == nil {
		m.cri = &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
		srv := grpc.NewServer()
		runtimeapi.RegisterRuntimeServiceServer(srv, criServer{m: m})
		go srv.Serve(m.cri)
		m.criStop = srv.Stop
	}
	return m.cri
}

// criServer is containerd's CRI runtime service, as far as Version: a
// containerd an upgrade installed that crash-loops answers once, then never
// again while its service still says Running.
type criServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	m *Machine
}

func (c criServer) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	s, _ := m.runtime()
	if s == nil || !s.running {
		return nil, status.Error(codes.Unavailable, "containerd is stopping")
	}
	v := m.containerdVersion()
	if m.o.RuntimeCrashLoops && v != m.bootContainerd {
		s.answers++
		if s.answers > 1 {
			return nil, status.Error(codes.Unavailable, "containerd exited")
		}
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "containerd", RuntimeVersion: "v" + v, RuntimeApiVersion: "v1"}, nil
}

// pipeListener hands the server the far ends of the pipes dialled.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) dial() (net.Conn, error) {
	a, b := net.Pipe()
	go func() {
		select {
		case l.conns <- b:
		case <-l.done:
			b.Close()
		}
	}()
	return a, nil
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(containerdPipe) }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }
