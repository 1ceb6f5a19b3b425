-- Tasks on one loop: run, spawn, gather, sleep, cancel, shield; waits outside any task; processes.
local loop = require "glsb.loop"
local process = require "glsb.process"

describe("glsb.loop #core #unit", function()
  it("run returns the root task's results and re-raises its error", function()
    assert.same({ 1, 2 }, { loop.run(function(a) return a, 2 end, 1) })
    local ok, err = pcall(loop.run, function() error({ class = "X" }, 0) end)
    assert.is_false(ok)
    assert.equal("X", err.class)
  end)

  it("string errors from a task carry a traceback", function()
    local ok, err = pcall(loop.run, function() error("boom") end)
    assert.is_false(ok)
    assert.matches("boom", err)
    assert.matches("stack traceback", err)
  end)

  it("gather waits for all tasks and returns first results in argument order", function()
    local order = {}
    local r = { loop.run(function()
      local a = loop.spawn(function() loop.sleep(0.05); order[#order + 1] = "a"; return "A" end)
      local b = loop.spawn(function() loop.sleep(0.01); order[#order + 1] = "b"; return "B" end)
      return loop.gather(a, b)
    end) }
    assert.same({ "A", "B" }, r)
    assert.same({ "b", "a" }, order) -- they really ran concurrently
  end)

  it("gather accepts an array and raises the first failure after all finished", function()
    local finished = false
    local ok, err = pcall(loop.run, function()
      local t1 = loop.spawn(function() error({ which = 1 }, 0) end)
      local t2 = loop.spawn(function() loop.sleep(0.02); finished = true end)
      return loop.gather({ t1, t2 })
    end)
    assert.is_false(ok)
    assert.equal(1, err.which)
    assert.is_true(finished)
  end)

  it("sleep outside any task drives the loop itself and lets spawned tasks run", function()
    local ran = false
    loop.spawn(function() ran = true end)
    loop.sleep(0.01)
    assert.is_true(ran)
  end)

  it("timers fire in deadline order", function()
    local seen = {}
    loop.run(function()
      local ts = {}
      for _, d in ipairs({ 0.03, 0.01, 0.02, 0.0 }) do
        ts[#ts + 1] = loop.spawn(function() loop.sleep(d); seen[#seen + 1] = d end)
      end
      loop.gather(ts)
    end)
    assert.same({ 0.0, 0.01, 0.02, 0.03 }, seen)
  end)

  it("cancel raises a Cancelled error at the task's wait point", function()
    local after = false
    local t = loop.spawn(function() loop.sleep(30); after = true end)
    loop.run(function() loop.sleep(0.01); t:cancel() end)
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.is_true(loop.is_cancelled(err))
    assert.is_false(after)
    assert.matches("cancelled", tostring(err))
  end)

  it("shield defers a cancel until the shielded work is done", function()
    local cleaned = false
    local t = loop.spawn(function()
      local ok, err = pcall(loop.sleep, 30)
      assert(not ok and loop.is_cancelled(err))
      loop.shield(function() loop.sleep(0.05); cleaned = true end)
      error(err, 0)
    end)
    loop.run(function() loop.sleep(0.01); t:cancel() end)
    assert.is_false(pcall(t.wait, t))
    assert.is_true(cleaned)
  end)

  it("a wait with a deadline times out", function()
    local t = loop.spawn(function() loop.sleep(30) end)
    local r, why = loop.run(function() return t:wait(0.02) end)
    assert.is_nil(r)
    assert.equal("timeout", why)
    t:cancel()
    loop.drain(1)
  end)

  it("a task cannot wait for itself", function()
    assert.has_error(function()
      loop.run(function()
        local me = loop.current()
        me:wait()
      end)
    end)
  end)

  it("timers still fire in deadline order when many of them are taken out early", function()
    local fired, cancelled = {}, 0
    loop.run(function()
      local ts = {}
      -- due 200..249 ms from now, in a shuffled order: far enough that spawning them (and a garbage
      -- collection a spec before left due) ends before the first is due, so every cancel below
      -- takes a timer out of the heap instead of racing its firing
      local base = loop.now() + 0.2
      for i = 1, 200 do
        local due = base + ((i * 7919) % 50) / 1000
        ts[i] = loop.spawn(function()
          loop.wait(nil, due)
          fired[#fired + 1] = due
        end)
      end
      loop.sleep(0.01)
      for i = 1, 200, 3 do ts[i]:cancel() end -- a third of the timers leave the heap from anywhere in it
      for _, t in ipairs(ts) do
        if not pcall(t.wait, t) then cancelled = cancelled + 1 end
      end
    end)
    assert.equal(200, #fired + cancelled)
    assert.equal(67, cancelled, "every third timer is taken out before it is due")
    for i = 2, #fired do assert.is_true(fired[i - 1] <= fired[i], "timer " .. i .. " fired out of order") end
  end)

  it("a wait that ends before its deadline lets go of its timer, and so of its task, at once", function()
    local core = require "glsb.core"
    local p = assert(process.spawn({ argv = { "cat" } }))
    local token = core.watch(p:fd("stdout"), "r")
    local seen = setmetatable({}, { __mode = "k" })
    -- a live timer due before theirs (a lease, a long sleep) sits on top of the heap meanwhile
    local keeper = loop.spawn(function() loop.sleep(1800) end)
    loop.run(function()
      local ts = {}
      for i = 1, 100 do
        ts[i] = loop.spawn(function() loop.wait(token, loop.now() + 3600) end)
        seen[ts[i]] = true
      end
      loop.sleep(0.01)
      assert.equal(101, loop.stats().timers)
      assert(p:write("x", loop.now() + 5))
      loop.gather(ts)
    end)
    core.unwatch(token)
    -- half an hour before those deadlines: only the keeper's timer is left, no task is kept alive by one
    assert.same({ tokens = 0, timers = 1, ready = 0 }, loop.stats())
    collectgarbage()
    collectgarbage()
    assert.is_nil(next(seen), "a finished task is still referenced")
    keeper:cancel()
    loop.drain(1)
    assert.same({ tokens = 0, timers = 0, ready = 0 }, loop.stats())
    p:kill("KILL")
    p:wait(loop.now() + 5)
    p:close()
  end)

  describe("several waits on one token", function()
    local core = require "glsb.core"
    local p, token
    before_each(function()
      -- a token that becomes ready when we say so: cat's stdout once a byte is written to it
      p = assert(process.spawn({ argv = { "cat" } }))
      token = core.watch(p:fd("stdout"), "r")
    end)
    after_each(function()
      core.unwatch(token)
      p:kill("KILL")
      p:wait(loop.now() + 5)
      p:close()
    end)

    local function waiter(log, name, deadline)
      return loop.spawn(function()
        local ok, why = pcall(loop.wait, token, deadline)
        log[name] = ok and why or (loop.is_cancelled(why) and "cancelled" or tostring(why))
      end)
    end

    it("all wake when it is ready, in the order they waited", function()
      local log, order = {}, {}
      loop.run(function()
        local ts = {}
        for i = 1, 3 do
          ts[i] = loop.spawn(function()
            log[i] = loop.wait(token, loop.now() + 5)
            order[#order + 1] = i
          end)
        end
        loop.sleep(0.01)
        assert.same({}, log) -- nobody woke before the byte
        assert(p:write("x", loop.now() + 5))
        loop.gather(ts)
      end)
      assert.same({ "ready", "ready", "ready" }, log)
      assert.same({ 1, 2, 3 }, order)
    end)

    it("a cancelled or timed-out waiter leaves the others waiting", function()
      local log = {}
      loop.run(function()
        local first = waiter(log, "first", loop.now() + 5)
        local cancelled = waiter(log, "cancelled")
        waiter(log, "timed", loop.now() + 0.01)
        local last = waiter(log, "last", loop.now() + 5)
        loop.sleep(0.02)
        cancelled:cancel()
        loop.sleep(0.01)
        assert.same({ cancelled = "cancelled", timed = "timeout" }, log)
        assert.is_false(first:done())
        assert.is_false(last:done())
        assert(p:write("x", loop.now() + 5))
        loop.gather(first, last)
      end)
      assert.same({ first = "ready", cancelled = "cancelled", timed = "timeout", last = "ready" }, log)
    end)

    it("a wait outside any task and a task's wait share it", function()
      local log = {}
      local t = waiter(log, "task", loop.now() + 5)
      loop.spawn(function()
        loop.sleep(0.01)
        assert(p:write("x", loop.now() + 5))
      end)
      assert.equal("ready", loop.wait(token, loop.now() + 5))
      loop.run(function() t:wait() end)
      assert.same({ task = "ready" }, log)
    end)
  end)

  it("rejects misuse", function()
    assert.has_error(function() loop.spawn(42) end)
    assert.has_error(function() loop.sleep("x") end)
    assert.has_error(function() loop.run(nil) end)
  end)
end)

describe("glsb.process #core #unit", function()
  it("raises the soft descriptor limit to the hard one at the first spawn (a local sandbox holds five)", function()
    -- a fresh glsb-lua under a soft limit of 256 (hard left as it is), before and after one spawn
    local script = [[
      local function soft() return io.open("/proc/self/limits"):read("a"):match("Max open files%s+(%d+)") end
      local before = soft()
      require("glsb.process").run({ "true" })
      io.write(before, " ", soft(), " ", io.open("/proc/self/limits"):read("a"):match("Max open files%s+%d+%s+(%S+)"))
    ]]
    local out, err = process.run({ "sh", "-c", 'ulimit -S -n 256 && exec "$0" -e "$1"', "build/glsb-lua", script })
    local before, after, hard = (out or ""):match("^(%d+) (%d+) (%S+)$")
    assert.equal("256", before, tostring(err))
    if hard ~= "unlimited" then assert.equal(hard, after) else assert.is_true(tonumber(after) > 256) end
  end)

  it("runs a program and captures stdout, stderr and the exit code", function()
    local out, err, st = process.run({ "sh", "-c", "printf 'a\\nb'; echo e >&2; exit 3" })
    assert.equal("a\nb", out)
    assert.equal("e\n", err)
    assert.equal(3, st.code)
  end)

  it("feeds stdin and keeps binary bytes exact", function()
    local data = "\0\1\255" .. string.rep("q", 200000)
    local out, _, st = process.run({ "cat" }, { input = data })
    assert.equal(data, out)
    assert.equal(0, st.code)
  end)

  it("times out, kills, and leaves no child behind", function()
    local out, why = process.run({ "sleep", "30" }, { timeout = 0.1 })
    assert.is_nil(out)
    assert.equal("timeout", why)
  end)

  it("reports a signal death", function()
    local _, _, st = process.run({ "sh", "-c", "kill -9 $$" })
    assert.equal(9, st.signal)
  end)

  it("reads lines as they come", function()
    local p = assert(process.spawn({ argv = { "sh", "-c", "echo one; sleep 0.05; echo two" }, stdin = "null" }))
    assert.equal("one", p:read_line())
    assert.equal("two", p:read_line())
    assert.same({ nil, "eof" }, { p:read_line() })
    assert.equal(0, p:wait().code)
    p:close()
  end)

  it("gives the child an extra pipe on fd 3 when asked, and none otherwise", function()
    local p = assert(process.spawn({ argv = { "sh", "-c", "echo status >&3; echo out" }, fd3 = "pipe", stdin = "null" }))
    assert.equal("status", p:read_line("fd3"))
    assert.equal("out", p:read_line("stdout"))
    assert.equal(0, p:wait().code)
    p:close()
    local q = assert(process.spawn({ argv = { "sh", "-c", "echo x >&3" }, stdin = "null" }))
    assert.matches("Bad file descriptor", q:read_line("stderr"))
    assert.equal(2, q:wait().code)
    q:close()
    assert.has_error(function() process.spawn({ argv = { "true" }, stdout = "none" }) end)
  end)

  it("hands the child no fd of ours beyond its stdio, not even files from io.open", function()
    local f = assert(io.open("/dev/null", "r")) -- Lua's files are not close-on-exec
    local out = process.run({ "sh", "-c", "ls /proc/$$/fd" })
    f:close()
    assert.equal("0\n1\n2\n", out)
  end)

  it("a missing program is an error value, not a raise", function()
    local p, err = process.spawn({ argv = { "/nonexistent/prog" } })
    assert.is_nil(p)
    assert.matches("nonexistent", err)
  end)

  it("the loop reaps a child as soon as it exits: no zombie waits for a poll()", function()
    local p = assert(process.spawn({ argv = { "true" }, stdin = "null", stdout = "null", stderr = "null" }))
    local token = p.proc.exit_token
    assert.is_number(token)
    -- only the loop runs here: nobody calls poll() or wait() before looking at /proc
    assert.equal("ready", loop.wait(token, loop.now() + 10))
    assert.is_nil(io.open("/proc/" .. p.pid .. "/stat"), "the child is still a zombie")
    assert.same({ code = 0 }, p.proc:poll())
    assert.same({ code = 0 }, p:wait(loop.now() + 1))
    p:close()
  end)

  it("tasks waiting on one process's exit all wake; a cancelled waiter does not disturb the others", function()
    local p = assert(process.spawn({ argv = { "sh", "-c", "read x; exit 7" }, stdout = "null", stderr = "null" }))
    local got = {}
    loop.run(function()
      local function waiter(name)
        return loop.spawn(function()
          local ok, st = pcall(p.wait, p, loop.now() + 10)
          got[name] = ok and st or (loop.is_cancelled(st) and "cancelled" or tostring(st))
        end)
      end
      -- as the local provider has them: a running call and a lease's teardown wait for the same exit
      local call, teardown, gone = waiter("call"), waiter("teardown"), waiter("gone")
      loop.sleep(0.02)
      gone:cancel()
      loop.sleep(0.02)
      assert.same({ gone = "cancelled" }, got)
      assert(p:write("\n", loop.now() + 5))
      loop.gather(call, teardown)
    end)
    assert.same({ call = { code = 7 }, teardown = { code = 7 }, gone = "cancelled" }, got)
    p:close()
  end)

  it("a process reaped by poll() still wakes the tasks waiting on its exit token", function()
    local p = assert(process.spawn({ argv = { "sh", "-c", "read x" }, stdout = "null", stderr = "null" }))
    local token = p.proc.exit_token
    local woke
    loop.run(function()
      local t = loop.spawn(function() woke = loop.wait(token, loop.now() + 10) end)
      loop.sleep(0.01)
      p:close_stdin()
      local st
      repeat st = p.proc:poll() until st -- reaped here, not by the loop's step
      t:wait()
    end)
    assert.equal("ready", woke)
    p:close()
  end)

  it("two processes run concurrently in tasks", function()
    local marks = {}
    loop.run(function()
      local a = loop.spawn(function() process.run({ "sh", "-c", "sleep 0.1; echo a" }); marks[#marks + 1] = "a" end)
      local b = loop.spawn(function() process.run({ "sh", "-c", "echo b" }); marks[#marks + 1] = "b" end)
      loop.gather(a, b)
    end)
    assert.same({ "b", "a" }, marks)
  end)
end)
