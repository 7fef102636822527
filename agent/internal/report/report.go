// Package report is the agent's WindowsNodeReport (winpool.dev/v1alpha1): the
// object, one per node in the agents' namespace and named after the Node,
// where the agent reports its apply result and what it observes on the host.
// The agent writes no Node: every Node write reaches every Node watcher of
// the cluster, a report only winpool. The shape is defined by the Rust types
// (src/api/report.rs); the golden files in testdata/ keep both sides to it.
package report

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"winpool.dev/agent/internal/names"
)

// Resource names the reports' API.
var Resource = schema.GroupVersionResource{Group: "winpool.dev", Version: "v1alpha1", Resource: "windowsnodereports"}

const Kind = "WindowsNodeReport"

// Report is a WindowsNodeReport.
type Report struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is empty: a report is all observation (the CRD requires one).
	Spec struct{} `json:"spec"`
	// Status is what the agent reports, written through the status
	// subresource (a create keeps none of it).
	Status Status `json:"status,omitempty"`
}

// Status is what the agent reports; every field is the agent's own.
type Status struct {
	AgentVersion string     `json:"agentVersion,omitempty"`
	Apply        *Apply     `json:"apply,omitempty"`
	Observed     *Observed  `json:"observed,omitempty"`
	HNS          *HNS       `json:"hns,omitempty"`
	Preflight    *Preflight `json:"preflight,omitempty"`
	HNSRepair    *HNSRepair `json:"hnsRepair,omitempty"`
	Staging      *Staging   `json:"staging,omitempty"`
	Offer        *Offer     `json:"offer,omitempty"`
}

// StagingStatus values: the download of the pending revision's update
// before the drain.
type StagingStatus string

const (
	StagingRunning StagingStatus = "Staging"
	// StagingStaged: what the install takes is on the node; the operator
	// starts only a staged node (rollout.staging: true).
	StagingStaged StagingStatus = "Staged"
	StagingFailed StagingStatus = "Failed"
)

// Staging is the agent's download of its pool's target revision's update
// while the node serves.
type Staging struct {
	Revision string        `json:"revision"`
	Status   StagingStatus `json:"status"`
	// Items: what the install will take, in its order (none: the revision
	// needs no OS update).
	Items []StagedItem `json:"items,omitempty"`
	// RebootFree: what is staged installs without a reboot (a hotpatch);
	// a pool with rollout.hotpatch: true installs it without a drain.
	RebootFree bool `json:"rebootFree,omitempty"`
	// Message: why it failed, naming the update, its code and the log.
	Message string `json:"message,omitempty"`
	// Since: when it reached this status for this revision.
	Since *metav1.Time `json:"since,omitempty"`
}

// StagedItem is one update or package on the node.
type StagedItem struct {
	// Name: "KB5050002: <title>", or a package's file name.
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// SHA256 of a package as verified on disk.
	SHA256 string `json:"sha256,omitempty"`
	// RebootFree: it installs without a reboot (a hotpatch).
	RebootFree bool `json:"rebootFree,omitempty"`
}

// RepairResult is how the agent's restart of kube-proxy went.
type RepairResult string

const (
	// RepairRestarted: kube-proxy's service stopped and runs again, or its
	// pod's process ended and the kubelet started it again.
	RepairRestarted RepairResult = "Restarted"
	// RepairFailed: it did not (Message names the service or process and
	// the error).
	RepairFailed RepairResult = "Failed"
	// RepairUnsupported: kube-proxy is neither a service of its own nor a
	// pod's process on the host (rke2 runs it as its child).
	RepairUnsupported RepairResult = "Unsupported"
)

// HNSRepair is the agent's restart of kube-proxy the operator asked for
// (names.AnnHNSRepair), at most one per boot.
type HNSRepair struct {
	// BootID is the boot the restart was asked for and made in.
	BootID  string       `json:"bootID"`
	At      metav1.Time  `json:"at"`
	Service string       `json:"service,omitempty"`
	Result  RepairResult `json:"result"`
	Message string       `json:"message,omitempty"`
}

// Apply is the result of the agent's last apply.
type Apply struct {
	Revision string            `json:"revision"`
	Status   names.ApplyStatus `json:"status"`
	Message  string            `json:"message,omitempty"`
	// StartedAt is the operator's start (winpool.dev/started-at) this result
	// answers: the operator never reads it as the answer to a later one.
	StartedAt string `json:"startedAt,omitempty"`
	// Heartbeat: the servicing task was alive then (RFC 3339: its start,
	// moved at most every decide.HeartbeatReportEvery while it installs,
	// its end); the operator does not time out a node whose task beats, and
	// times what follows the install from the last beat.
	Heartbeat string `json:"heartbeat,omitempty"`
	// ResultCode: the HRESULT the update's install failed with
	// ("0x800F0922"), on a Failed result only.
	ResultCode string `json:"resultCode,omitempty"`
	// NoReboot: Succeeded after an install Windows asked no reboot for (a
	// hotpatch); the operator then waits for no new boot.
	NoReboot bool `json:"noReboot,omitempty"`
	// HostBuild, with NoReboot: the build the host runs after the install,
	// from the registry (the kubelet's kernelVersion keeps the build it read
	// at its start until it restarts).
	HostBuild string `json:"hostBuild,omitempty"`
	// Installed: what the servicing task installed for this start, in
	// order (Windows Update's updates and the revision's packages), on
	// Rebooting and Succeeded: the operator keeps it as the node's record.
	Installed []InstalledUpdate `json:"installed,omitempty"`
}

// InstalledUpdate is one update or package the servicing task installed.
type InstalledUpdate struct {
	// KB: "KB5050002", or a package's file name.
	KB    string `json:"kb"`
	Title string `json:"title,omitempty"`
	// CveIDs: the CVE IDs Windows Update lists for the update (IUpdate2.CveIDs).
	CveIDs []string `json:"cveIds,omitempty"`
}

// Observed is what the agent sees on the host.
type Observed struct {
	CNIMode         string `json:"cniMode,omitempty"`
	CSIProxyVersion string `json:"csiProxyVersion,omitempty"`
	RuntimeService  string `json:"runtimeService,omitempty"`
	CSIProxyHost    string `json:"csiProxyHost,omitempty"`
}

// HNS is what the host's Host Network Service holds, and in which boot
// (the Node's status.nodeInfo.bootID) it was read: HNS starts empty after a
// reboot, so counts of an earlier boot say nothing of this one.
type HNS struct {
	LoadBalancers int64  `json:"loadBalancers"`
	Endpoints     int64  `json:"endpoints"`
	BootID        string `json:"bootID,omitempty"`
	// ObservedAt is when the agent first read these counts in this boot
	// (the operator times how soon it says a loss from it).
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}

// Offer is the newest OS cumulative update the node's update source offers
// it, for a pool whose patch level follows it (os.patchPolicy); the
// operator resolves the pool's patch level from its members' offers.
type Offer struct {
	// KB is the update's KB ID ("KB5050002"); "" when nothing newer than the
	// running build is offered.
	KB        string       `json:"kb,omitempty"`
	Title     string       `json:"title,omitempty"`
	Published *metav1.Time `json:"published,omitempty"`
	// PassedOver: updates offered in the OS's classification that are not
	// the OS's cumulative update (.NET Framework's), "KB: title", at most
	// MaxPassedOver: why a search that found them offers no KB.
	PassedOver []string `json:"passedOver,omitempty"`
	// SearchedAt is when the search this answers ended.
	SearchedAt metav1.Time `json:"searchedAt"`
	// Error: the last search failed; the fields above are the one before.
	Error string `json:"error,omitempty"`
}

// MaxPassedOver is how many of Offer.PassedOver the report's schema takes.
const MaxPassedOver = 8

// Verdict values of Preflight.
const (
	VerdictReady   = "Ready"
	VerdictBlocked = "Blocked"
)

// Preflight is the agent's read-only judgement of its pool's target revision.
type Preflight struct {
	Revision string   `json:"revision"`
	Verdict  string   `json:"verdict"`
	Reasons  []string `json:"reasons,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	// Since is when the agent first reached this verdict for this revision.
	Since *metav1.Time `json:"since,omitempty"`
}

// Client reads and writes the reports of one namespace.
type Client interface {
	Get(ctx context.Context, name string) (*Report, error)
	List(ctx context.Context) ([]Report, error)
	// ListWatch lists and watches the report named name alone.
	ListWatch(name string) cache.ListerWatcher
	// Create writes a new report; the API server keeps no status from it.
	Create(ctx context.Context, r *Report) (*Report, error)
	// ReplaceStatus makes the report's status exactly status, in one
	// request to the status subresource.
	ReplaceStatus(ctx context.Context, name string, status Status) (*Report, error)
}

// NewClient is a Client over the dynamic client.
func NewClient(dyn dynamic.Interface, namespace string) Client {
	return &client{dyn: dyn, api: dyn.Resource(Resource).Namespace(namespace)}
}

type client struct {
	dyn dynamic.Interface
	api dynamic.ResourceInterface
}

func (c *client) Get(ctx context.Context, name string) (*Report, error) {
	u, err := c.api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

func (c *client) List(ctx context.Context) ([]Report, error) {
	l, err := c.api.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]Report, 0, len(l.Items))
	for i := range l.Items {
		r, err := FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, nil
}

func (c *client) ListWatch(name string) cache.ListerWatcher {
	only := fields.OneTermEqualSelector("metadata.name", name).String()
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = only
			return c.api.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = only
			return c.api.Watch(ctx, o)
		},
	}, c.dyn) // a fake dynamic client cannot stream a list
}

func (c *client) Create(ctx context.Context, r *Report) (*Report, error) {
	r.APIVersion, r.Kind = Resource.GroupVersion().String(), Kind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	u, err := c.api.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: names.FieldManager})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

func (c *client) ReplaceStatus(ctx context.Context, name string, status Status) (*Report, error) {
	// "add" sets a member whether or not it is there: a new report has no status yet.
	return c.patch(ctx, name, []map[string]any{{"op": "add", "path": "/status", "value": status}}, "status")
}

func (c *client) patch(ctx context.Context, name string, ops []map[string]any, subresource ...string) (*Report, error) {
	body, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	u, err := c.api.Patch(ctx, name, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: names.FieldManager}, subresource...)
	if err != nil {
		return nil, err
	}
	return FromUnstructured(u)
}

// FromUnstructured reads a report the dynamic client returned.
func FromUnstructured(u *unstructured.Unstructured) (*Report, error) {
	var r Report
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("report %s: %w", u.GetName(), err)
	}
	r.ManagedFields = nil
	return &r, nil
}
