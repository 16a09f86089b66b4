-- Argo CD health check for external-secrets.io/PushSecret (esr).
-- Healthy only when Ready=True AND status.syncedResourceVersion starts with
-- "<metadata.generation>-", so an old Ready=True left by a stopped controller after a spec change
-- is Progressing. Lua 5.1 compatible.
local hs = {}

local function syncedGeneration(rv)
  if type(rv) ~= "string" then
    return nil
  end
  local prefix = string.match(rv, "^(%d+)%-")
  if prefix == nil then
    return nil
  end
  return tonumber(prefix)
end

if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Pending deletion"
  return hs
end

local generation = nil
if obj.metadata ~= nil then
  generation = tonumber(obj.metadata.generation)
end

local ready = nil
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    end
  end
end

if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for PushSecret"
  return hs
end

local observed = nil
if obj.status.observedGeneration ~= nil then
  observed = tonumber(obj.status.observedGeneration)
end
if observed ~= nil and generation ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
  return hs
end

if ready.status == "False" then
  hs.status = "Degraded"
  hs.message = ready.message or "PushSecret is not ready"
  return hs
end

if ready.status ~= "True" then
  hs.status = "Progressing"
  hs.message = ready.message or "Waiting for PushSecret"
  return hs
end

local synced = syncedGeneration(obj.status.syncedResourceVersion)
if generation == nil or (synced ~= nil and synced == generation) then
  hs.status = "Healthy"
  hs.message = ready.message or "PushSecret synced"
  return hs
end

hs.status = "Progressing"
if synced == nil then
  hs.message = "Waiting for the controller to push generation " .. tostring(generation)
else
  hs.message = "Waiting for the controller to push generation " .. tostring(generation) ..
    " (last pushed generation " .. tostring(synced) .. ")"
end
return hs
