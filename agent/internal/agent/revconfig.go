package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"winpool.dev/agent/internal/config"
	"winpool.dev/agent/internal/decide"
	"winpool.dev/agent/internal/names"
)

// configCache keeps the revision configurations the agent has read. Revision
// ConfigMaps are immutable and named by a hash of their content, so one read
// is good for the revision's life. Only found configurations are kept: a
// missing one may appear.
type configCache map[string]config.Revision

// configCacheSize bounds the cache; a node moves between a couple of
// revisions at most while an agent runs.
const configCacheSize = 4

// revisionConfig reads the configuration of pool's revision rev: from the
// pools' targets the agent watches when rev is one (the usual case: a node is
// started with its pool's target, and a restarted agent has listed the
// targets again), else with GET, retrying API errors until ctx ends.
func (a *agent) revisionConfig(ctx context.Context, pool, rev string) decide.RevisionConfig {
	name := names.ConfigMapName(pool, rev)
	if c, ok := a.configs[name]; ok {
		return decide.RevisionConfig{Config: c}
	}
	var found decide.RevisionConfig
	if data, ok := a.targets.configMap(a.o.Namespace, name); ok {
		found = readRevisionConfig(data, pool, rev)
		a.keepConfig(name, found)
		return found
	}
	err := a.retry(ctx, "get configmap "+a.o.Namespace+"/"+name, func(ctx context.Context) error {
		cm, err := a.o.Client.CoreV1().ConfigMaps(a.o.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			found = decide.RevisionConfig{Status: decide.ConfigNotFound}
			return nil
		}
		if err != nil {
			return err
		}
		found = readRevisionConfig(cm.Data, pool, rev)
		return nil
	})
	if err != nil {
		return decide.RevisionConfig{Status: decide.ConfigUnreadable, Problem: err.Error()}
	}
	a.keepConfig(name, found)
	return found
}

func (a *agent) keepConfig(name string, found decide.RevisionConfig) {
	if found.Status != decide.ConfigFound {
		return
	}
	if len(a.configs) >= configCacheSize {
		clear(a.configs)
	}
	a.configs[name] = found.Config
}

func readRevisionConfig(data map[string]string, pool, rev string) decide.RevisionConfig {
	unreadable := func(format string, args ...any) decide.RevisionConfig {
		return decide.RevisionConfig{Status: decide.ConfigUnreadable, Problem: fmt.Sprintf(format, args...)}
	}
	raw, ok := data[names.ConfigMapKey]
	if !ok {
		return unreadable("has no key %s", names.ConfigMapKey)
	}
	c, err := config.Parse([]byte(raw))
	if err != nil {
		return unreadable("%v", err)
	}
	if c.Revision != rev {
		return unreadable("holds revision %q, not %q", c.Revision, rev)
	}
	if c.Pool != "" && c.Pool != pool {
		return unreadable("holds pool %q, not %q", c.Pool, pool)
	}
	return decide.RevisionConfig{Config: c}
}
