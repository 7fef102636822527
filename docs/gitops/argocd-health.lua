-- Argo CD health check for winpool.dev/WindowsNodePool (argocd-cm key
-- resource.customizations.health.winpool.dev_WindowsNodePool).
-- Argo CD runs a customization without Lua's string library (only base,
-- table, package and a reduced os), so this uses nothing but `..` and ipairs.
local hs = {}

-- winpool writes every condition on every status: a pool without them has
-- not been looked at yet, which is not a verdict on it.
if obj.status == nil or obj.status.conditions == nil or #obj.status.conditions == 0 then
  hs.status = "Progressing"
  hs.message = "Waiting for winpool to report the pool's status"
  return hs
end

-- Conditions written for an older spec say nothing about the current one.
-- Argo CD hands every JSON number to Lua as a double, exact far beyond any
-- generation, so comparing the two numbers is exact; a missing
-- observedGeneration (nil) counts as not observed.
local generation = obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for winpool to observe generation " .. generation
  return hs
end

local conditions = {}
for _, c in ipairs(obj.status.conditions) do
  conditions[c.type] = c
end
local function isTrue(type)
  return conditions[type] ~= nil and conditions[type].status == "True"
end

-- The order is the verdict. Stalled first: a rollout that paused itself at
-- its failure limit is also Paused, and it needs a person, not patience.
if isTrue("Stalled") then
  hs.status = "Degraded"
  hs.message = conditions["Stalled"].message
  return hs
end
-- Nodes are being updated (or a health gate holds them for now): it moves.
if isTrue("Reconciling") then
  hs.status = "Progressing"
  hs.message = conditions["Reconciling"].message
  return hs
end
-- Held on purpose (rollout.paused or the winpool.dev/paused annotation):
-- Suspended, so a paused pool neither alarms nor passes for done.
if isTrue("Paused") then
  hs.status = "Suspended"
  hs.message = conditions["Paused"].message
  return hs
end
-- Ready is True when every node runs the revision, and also when the rest
-- waits for its maintenance window with nothing failed: that is the pool
-- doing what it was told, for weeks at a time.
if isTrue("Ready") then
  hs.status = "Healthy"
  hs.message = conditions["Ready"].message
  return hs
end

-- Not ready and nothing says why it is stuck (no nodes yet, a condition
-- Unknown): keep waiting rather than call it failed.
hs.status = "Progressing"
if conditions["Ready"] ~= nil then
  hs.message = conditions["Ready"].message
else
  hs.message = "Waiting for winpool to report the pool's Ready condition"
end
return hs
