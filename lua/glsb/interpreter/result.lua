-- glsb.interpreter.result: what ai:execute returns, and its transcript (tostring).
local M = {}

local Result = {}
Result.__index = Result
M.Result = Result

-- STOP_REASONS: why a run ended. Every one but "answer" is a limit; the run then made one last call
-- asking the model to answer from what it had.
M.STOP_REASONS = {
  answer = "the model answered without calling the tool",
  max_steps = "the step limit (max_steps)",
  max_duration = "the time limit of the run (max_duration)",
  max_tokens = "the token budget (max_tokens)",
  repeated_error = "the same failing code or the same error again and again (max_repeats)",
}

function M.new(t) return setmetatable(t, Result) end

local function indent(s, prefix)
  return prefix .. tostring(s):gsub("\n", "\n" .. prefix)
end

local function clip(s, n)
  s = tostring(s or "")
  if #s > n then return s:sub(1, n) .. string.format(" [... %d more characters]", #s - n) end
  return s
end

function Result.__tostring(self)
  local u = self.usage or {}
  local lines = {
    string.format("glsb.interpreter: %s, %d step%s, %d ms, %d tokens in / %d out", self.stop_reason, #self.steps,
      #self.steps == 1 and "" or "s", self.duration_ms or 0, u.input_tokens or 0, u.output_tokens or 0),
    "task: " .. clip(self.task, 500),
  }
  for _, s in ipairs(self.steps) do
    lines[#lines + 1] = string.format("step %d:", s.index)
    if s.message and s.message ~= "" then lines[#lines + 1] = indent(clip(s.message, 500), "  model: ") end
    for _, e in ipairs(s.executions) do
      if e.code then lines[#lines + 1] = "  code:\n" .. indent(clip(e.code, 2000), "    ") end
      if e.tool_error then
        lines[#lines + 1] = "  -> tool error: " .. e.tool_error
      elseif e.result then
        local r = e.result
        local bits = { tostring(r.status) }
        if type(r.stdout) == "string" and r.stdout ~= "" then bits[#bits + 1] = "stdout " .. #r.stdout .. " bytes" end
        if type(r.stderr) == "string" and r.stderr ~= "" then bits[#bits + 1] = "stderr " .. #r.stderr .. " bytes" end
        if #e.images > 0 then bits[#bits + 1] = #e.images .. " image" .. (#e.images == 1 and "" or "s") end
        if #e.files > 0 then bits[#bits + 1] = #e.files .. " file" .. (#e.files == 1 and "" or "s") .. " written" end
        lines[#lines + 1] = "  -> " .. table.concat(bits, ", ")
        if type(r.stdout) == "string" and r.stdout ~= "" then
          lines[#lines + 1] = indent(clip(r.stdout:gsub("%s+$", ""), 1000), "     | ")
        end
        if r.status ~= "success" and r.error then
          lines[#lines + 1] = indent(clip(tostring(r.error):gsub("%s+$", ""), 1000), "     ! ")
        end
      end
    end
  end
  lines[#lines + 1] = "answer:\n" .. indent(self.text, "  ")
  for _, f in ipairs(self.files) do
    lines[#lines + 1] = string.format("file: %s (%d bytes)", f.path, #f.data)
  end
  for _, im in ipairs(self.images) do
    lines[#lines + 1] = string.format("image: %s (%s, %d bytes%s)", im.name, im.mime, #im.data,
      im.path and (", " .. im.path) or "")
  end
  for _, f in ipairs(self.skipped_files or {}) do
    lines[#lines + 1] = string.format("file not downloaded: %s (%d bytes): %s", f.path, f.size or 0, f.reason)
  end
  return table.concat(lines, "\n")
end

return M
