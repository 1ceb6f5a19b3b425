-- glsb.constants: library-wide defaults. Providers may override the per-class
-- ones (see PROVIDERS.md); users override them per call.

local M = {}

-- glsb's version (glsb.VERSION; the scope of its trace spans). Kept here, the bottom layer, so that
-- whoever needs it (glsb.trace) does not load glsb itself. The VERSION file at the top of the tree is the
-- one source (glsb-lua is built with it): spec/unit/version_spec.lua fails when this one differs.
M.VERSION = "0.1.0"

M.DEFAULT_PROVIDER = "local"
M.DEFAULT_LANGUAGE = "python"
M.DEFAULT_UPLOAD_DIR = "/files"

-- Session lease of a sandbox, seconds (create opts.timeout).
M.DEFAULT_SANDBOX_TIMEOUT = 300
-- execute_code: nil means "the provider's default"; this is the fallback for a
-- provider that does not declare one.
M.DEFAULT_CODE_TIMEOUT = 300
-- execute_command and workspace commands: nil = 30 s; <= 0 disables the deadline.
M.DEFAULT_COMMAND_TIMEOUT = 30
M.DEFAULT_DOWNLOAD_TIMEOUT = 60
-- Per attempt of terminate.
M.DEFAULT_TERMINATE_TIMEOUT = 10

-- One timeout, one budget: an execution given `timeout = T` computes one deadline at its start, and every
-- sub-step (the files upload, each cell or request, each re-send, each lock wait) draws from it. Past
-- that deadline a provider waits at most DEADLINE_GRACE seconds for the far side's own verdict (envd or
-- execd reporting the process it killed at T, an interrupted cell's end) before it gives up itself with
-- TIMEOUT; the contract allows DEADLINE_MARGIN past T in all (that grace and the host's own clean-up,
-- spec/contract/suite.lua checks it on every provider).
M.DEADLINE_GRACE = 1
M.DEADLINE_MARGIN = 1.5
-- additional_packages install, whole install.
M.DEFAULT_PACKAGE_INSTALL_TIMEOUT = 600

-- Retry of sandbox creation: only transient failures, exponential backoff with
-- jitter, bounded. A cause's retry_after (Retry-After header) is honoured up to
-- max_retry_after.
M.CREATE_RETRY = {
  attempts = 3,          -- total attempts, first one included
  base_delay = 0.5,      -- seconds before the 2nd attempt
  factor = 2,
  max_delay = 8,
  jitter = 0.25,         -- +/- fraction of the delay
  max_retry_after = 30,
}

-- Retry of terminate: every failure except a permanent (4xx) one.
M.TERMINATE_RETRY = {
  attempts = 3,
  base_delay = 0.25,
  factor = 2,
  max_delay = 2,
  jitter = 0.25,
  max_retry_after = 5,
}

-- Upper bound of any single backoff sleep, whatever a server asks for.
M.MAX_BACKOFF = 60

return M
