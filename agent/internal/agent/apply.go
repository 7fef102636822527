package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/host"
	"winpool.dev/agent/internal/names"
)

// maxStepsPerPass is a backstop: every host step counts against a cap in
// decide, so a pass ends long before this unless the decision has a bug, and
// then the node fails with a message instead of looping.
const maxStepsPerPass = 32

// outcome is how a pass of converge ended.
type outcome int

const (
	settled   outcome = iota // nothing more to do until the Node changes
	waiting                  // decide wants another look after a while
	rebooting                // the host is rebooting: the agent stops acting
	stale                    // a report was for an earlier attempt: decide again now
)

// converge works on the Node's request, step after step, until nothing is
// left to do right now.
func (a *agent) converge(ctx context.Context) outcome {
	for range maxStepsPerPass {
		a.refreshView()
		node := a.view.current()
		if node == nil {
			return settled
		}
		// One read of what the node is asked: the operations' watch may move
		// on mid-pass, and a decision made for one start must not report,
		// confirm and save its state as another's.
		q := a.askOf(node)
		in, ok := a.input(ctx, node, q)
		if !ok {
			return settled
		}
		// Every report of this decision answers the operator's start it was
		// made for, in the state it was made in.
		attempt := startOf(q)
		step := decide.Next(in)
		if step.Action == decide.Idle {
			return settled
		}
		a.logStep(in.Revision, step)
		switch step.Action {
		case decide.Report:
			return a.reported(a.report(ctx, attempt, step.Report), settled)
		case decide.Wait:
			return a.reported(a.report(ctx, attempt, step.Report), waiting)
		case decide.Reboot:
			return a.reboot(ctx, attempt, in, step)
		case decide.InstallUpdate:
			if err := a.begin(ctx, attempt, in, step); err != nil {
				return a.reported(err, settled)
			}
			if err := a.o.Host.StartUpdate(ctx, step.Update); err != nil {
				return a.reported(a.hostFailed(ctx, attempt, in.Revision, fmt.Sprintf("cannot start servicing to install the update to %s", step.Target), err), settled)
			}
			a.log.Info("servicing task started", "revision", in.Revision, "target", step.Target.String(), "attempt", step.Update.Attempt)
			// The task's result comes back in Observe: look again at the next tick.
			return waiting
		case decide.UpgradeContainerd:
			if err := a.begin(ctx, attempt, in, step); err != nil {
				return a.reported(err, settled)
			}
			if err := a.o.Host.UpgradeContainerd(ctx, step.Runtime); err != nil {
				return a.reported(a.hostFailed(ctx, attempt, in.Revision, "installing containerd "+step.Version, err), settled)
			}
		}
		if ctx.Err() != nil {
			return settled
		}
	}
	msg := fmt.Sprintf("the agent took %d steps without finishing; this is a bug in the agent, please report it with its log", maxStepsPerPass)
	return a.reported(a.fail(ctx, a.attempt(), a.requested(), msg), settled)
}

// reported is how a pass ends after a report: as planned, unless the report
// was refused as stale (the operator started the node again while the agent
// worked on the earlier attempt); then the agent decides again at once from
// the Node as it is now.
func (a *agent) reported(err error, planned outcome) outcome {
	if errors.Is(err, errStaleReport) {
		return stale
	}
	return planned
}

// input gathers what decide needs. false: there is nothing to decide (no
// request, or a failure already reported, or ctx ended).
func (a *agent) input(ctx context.Context, node *corev1.Node, q ask) (decide.Input, bool) {
	in := decide.Input{
		Namespace:  a.o.Namespace,
		Pool:       q.pool,
		Revision:   q.revision,
		StartedAt:  q.startedAt,
		NodeState:  q.state,
		Standalone: a.o.Standalone,
		// Rebooted only when winpool drained it for this start and it is
		// still cordoned: neither a cordon nor an operation alone is enough.
		InService:    !node.Spec.Unschedulable || !q.drained,
		Reported:     a.lastReport(node),
		MaxAttempts:  a.o.MaxAttempts,
		NetworkGrace: a.o.NetworkGrace,
		Now:          time.Now(),
		// 0: the defaults; tests shorten it.
		TaskStartGrace:      a.o.TaskStartGrace,
		TransientRetryAfter: a.o.TransientRetryAfter,
		// The pool's install budget, as the operator's start gave it.
		UpdateTaskTimeout: decide.InstallBudget(q.installBudget),
		Undo:              q.undo,
	}
	// Nothing is read from the host for a request the operator does not let
	// the agent act on (a failed read would be reported on a node in service).
	finishing := decide.Finishing(in.NodeState, in.StartedAt, in.Revision, in.Reported)
	if !decide.Requested(in.Revision, in.Reported) || !(finishing || decide.MayTouch(in.NodeState, in.StartedAt, in.Standalone)) {
		return in, false
	}
	if err := a.observe(ctx); err != nil {
		in.ObserveError, in.ObserveFailingFor = err.Error(), time.Since(a.obsFailingSince)
	} else {
		in.Observed = a.obs
	}
	in.HNS = a.hnsNow()
	if !a.cniMissingSince.IsZero() {
		in.NetworkMissingFor = time.Since(a.cniMissingSince)
	}
	st, err := a.o.Host.LoadState()
	if err != nil {
		a.hostFailed(ctx, startOf(q), in.Revision, "cannot read the agent's state on the host", err)
		return in, false
	}
	in.State = st
	if in.Pool != "" {
		in.Config = a.revisionConfig(ctx, in.Pool, in.Revision)
	}
	if want := in.Config.Config.CSIProxyVersion; want != nil {
		in.Observed.CSIProxyVersion, in.CSIProxyWrongFor = a.observeCSIProxy(ctx, in.Revision, *want)
	}
	return in, ctx.Err() == nil
}

// begin reports a step and saves its state before the host works on it.
// An error: the step must not run.
func (a *agent) begin(ctx context.Context, attempt opStart, in decide.Input, step decide.Step) error {
	if err := a.report(ctx, attempt, step.Report); err != nil {
		return err
	}
	if err := a.confirmStart(ctx, attempt); err != nil {
		return err
	}
	return a.saveState(ctx, attempt, in, step.State)
}

// saveState keeps the counters on the host before a long operation, so that
// the caps hold across a crash or a reboot in the middle of it.
func (a *agent) saveState(ctx context.Context, attempt opStart, in decide.Input, st host.State) error {
	if st.Same(in.State) {
		return nil
	}
	if err := a.o.Host.SaveState(st); err != nil {
		if ferr := a.hostFailed(ctx, attempt, in.Revision, "cannot save the agent's state on the host (without it the attempt caps do not hold)", err); ferr != nil {
			return ferr
		}
		return err
	}
	return nil
}

// reboot writes the step's report (Rebooting, or the install's report that
// announced this reboot: then nothing), waits until it is on the API, and
// reboots.
func (a *agent) reboot(ctx context.Context, attempt opStart, in decide.Input, step decide.Step) outcome {
	if err := a.saveState(ctx, attempt, in, step.State); err != nil {
		return a.reported(err, settled)
	}
	// Retried until it lands: once the machine goes down nothing reports,
	// and the operator must know the node is rebooting on purpose.
	if err := a.report(ctx, attempt, step.Report); err != nil {
		return a.reported(err, settled)
	}
	// Never a reboot of a node the operator has put back into service.
	if err := a.confirmStart(ctx, attempt); err != nil {
		return a.reported(err, settled)
	}
	if err := a.o.Host.Reboot(ctx, step.RebootReason); err != nil {
		return a.reported(a.hostFailed(ctx, attempt, in.Revision, "cannot reboot the host", err), settled)
	}
	a.log.Info("reboot started; waiting to be stopped", "revision", in.Revision)
	return rebooting
}

// hostFailed reports a host call that failed, unless the agent is being
// stopped (the call most likely failed because of that). The error is the
// report's.
func (a *agent) hostFailed(ctx context.Context, attempt opStart, rev, what string, err error) error {
	return a.fail(ctx, attempt, rev, what+": "+err.Error())
}

func (a *agent) fail(ctx context.Context, attempt opStart, rev, msg string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r := decide.NodeReport{AppliedRevision: rev, Status: names.StatusFailed, Message: msg}
	a.logStep(rev, decide.Step{Action: decide.Report, Report: r})
	return a.report(ctx, attempt, r)
}

// attempt is the operator's start asked of the node now.
func (a *agent) attempt() opStart {
	if n := a.view.current(); n != nil {
		return startOf(a.askOf(n))
	}
	return opStart{}
}

// opStart is what of the operator's a report answers: its operation (a
// retry is a new one), the start it names and the phase the decision saw it
// in. Zero: no operator start (an agent run standalone), so no precondition.
type opStart struct{ name, startedAt, state string }

func startOf(q ask) opStart {
	return opStart{name: q.name, startedAt: q.startedAt, state: q.state}
}

// requested is the revision winpool asks of the node now.
func (a *agent) requested() string {
	if n := a.view.current(); n != nil {
		return a.askOf(n).revision
	}
	return ""
}

func (a *agent) logStep(rev string, s decide.Step) {
	a.log.Info("step", "revision", rev, "action", s.Action.String(), "status", string(s.Report.Status), "message", s.Report.Message)
}
