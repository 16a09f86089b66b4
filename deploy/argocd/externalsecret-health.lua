-- Argo CD health check for external-secrets.io/ExternalSecret (esr).
-- Unlike the stock check, it reports Healthy only when the controller has synced the CURRENT
-- generation: Ready=True AND status.syncedResourceVersion starts with "<metadata.generation>-".
-- An old Ready=True left behind by a stopped controller is therefore Progressing, not Healthy
-- (argo-cd #22707, ESO #4685). Lua 5.1 compatible (Argo CD runs gopher-lua).
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

-- refreshInterval of zero ("0", "0s", "0h0m0s", ...): no digit other than 0.
local function isZeroInterval(ri)
  return type(ri) == "string" and string.find(ri, "[1-9]") == nil
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
  hs.message = "Waiting for ExternalSecret"
  return hs
end

-- A controller that publishes status.observedGeneration tells us directly whether the status
-- (including a Ready=False) is about the current spec.
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
  -- Ready=False is never stale-healthy: the last attempt (for this generation when the
  -- controller is running) failed.
  hs.status = "Degraded"
  hs.message = ready.message or "ExternalSecret is not ready"
  return hs
end

if ready.status ~= "True" then
  hs.status = "Progressing"
  hs.message = ready.message or "Waiting for ExternalSecret"
  return hs
end

local synced = syncedGeneration(obj.status.syncedResourceVersion)
if generation == nil or (synced ~= nil and synced == generation) then
  hs.status = "Healthy"
  hs.message = ready.message or "Secret was synced"
  return hs
end

-- Policies under which the controller, by design, never re-syncs a spec change after the first
-- sync (ESO semantics): CreatedOnce, and Periodic with a zero refreshInterval.
local policy = "Periodic"
local interval = nil
if obj.spec ~= nil then
  if obj.spec.refreshPolicy ~= nil then
    policy = obj.spec.refreshPolicy
  end
  interval = obj.spec.refreshInterval
end
if synced ~= nil and (policy == "CreatedOnce" or (policy == "Periodic" and isZeroInterval(interval))) then
  hs.status = "Healthy"
  hs.message = (ready.message or "Secret was synced") ..
    " (generation " .. tostring(synced) .. "; refreshPolicy " .. policy .. " does not re-sync spec changes)"
  return hs
end

hs.status = "Progressing"
if synced == nil then
  hs.message = "Waiting for the controller to sync generation " .. tostring(generation)
else
  hs.message = "Waiting for the controller to sync generation " .. tostring(generation) ..
    " (last synced generation " .. tostring(synced) .. ")"
end
return hs
