package decide

// Where a person looks on the host when a step fails. Messages name them so
// that apply-message alone says where to go next.
const (
	CBSLog  = `C:\Windows\Logs\CBS\CBS.log`
	DISMLog = `C:\Windows\Logs\DISM\dism.log`
	// WindowsUpdateLog: Windows Update's log is ETW traces since Windows
	// Server 2016, read with the cmdlet.
	WindowsUpdateLog = `Get-WindowsUpdateLog (C:\Windows\Logs\WindowsUpdate\*.etl)`
	// AgentLog is the agent's own rotated log file on the host.
	AgentLog = `C:\ProgramData\winpool\logs\winpool-agent.log`
	// RuntimeResultFile is where the containerd upgrade task writes how it went.
	RuntimeResultFile = `C:\ProgramData\winpool\runtime\result.json`
	// RuntimeTaskName is the scheduled task that swaps containerd.
	RuntimeTaskName = `\winpool\containerd-upgrade`
	// ServicingResultFile is where the servicing task writes how it went.
	ServicingResultFile = `C:\ProgramData\winpool\servicing\result.json`
	// ServicingTaskName is the scheduled task that installs an update.
	ServicingTaskName = `\winpool\servicing`

	servicingLogs = `see ` + CBSLog + ` and ` + DISMLog + ` (and ` + AgentLog + `)`
)
