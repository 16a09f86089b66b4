-- Argo CD health check for external-secrets.io/ClusterExternalSecret (esr).
-- The ClusterExternalSecret status has no syncedResourceVersion, so the generation check is made
-- only when the controller publishes status.observedGeneration. Ready=False is Degraded with the
-- condition's message and the failed namespaces; the legacy PartiallyReady/NotReady=True
-- conditions are Degraded too. Lua 5.1 compatible.
local hs = {}

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Pending deletion"
  return hs
end

local generation = nil
if obj.metadata ~= nil then
  generation = tonumber(obj.metadata.generation)
end

if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for ClusterExternalSecret"
  return hs
end

local observed = tonumber(obj.status.observedGeneration)
if observed ~= nil and generation ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
  return hs
end

local function failedNamespaces()
  local names = {}
  if obj.status.failedNamespaces ~= nil then
    for _, f in ipairs(obj.status.failedNamespaces) do
      if f.namespace ~= nil then
        table.insert(names, f.namespace)
      end
    end
  end
  if #names == 0 then
    return ""
  end
  return " (failed namespaces: " .. table.concat(names, ", ") .. ")"
end

local ready = nil
for _, condition in ipairs(obj.status.conditions) do
  if (condition.type == "PartiallyReady" or condition.type == "NotReady") and condition.status == "True" then
    hs.status = "Degraded"
    hs.message = (condition.message or condition.type) .. failedNamespaces()
    return hs
  end
  if condition.type == "Ready" then
    ready = condition
  end
end

if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = (ready.message or "one or more namespaces failed") .. failedNamespaces()
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "ClusterExternalSecret is ready"
  return hs
end

hs.status = "Progressing"
hs.message = "Waiting for ClusterExternalSecret"
return hs
