import Dispatch
import TimerdCore
import TimerdEngine
import TimerdSystem

/// Starts job runs as child processes, on a serial queue that shares the registry's lane
/// (`QueueExecutor.core`): nothing here blocks, and a run handed over is then no thread wake-up.
///
/// Each run gets its own session and process group, stdin from /dev/null, and stdout+stderr on one pipe
/// whose lines are logged with the job name; the last `Limits.outputTailBytes` are kept for `show`.
/// Exit is noticed through a pidfd, never by polling.
///
/// Nothing here waits for a child: `Spawn.start` returns as soon as the child exists (before its
/// `execve`), and a child that cannot start its program says so when it exits. So one queue serves every
/// run; before, each spawn held its queue until the child's `execve` (`clone(CLONE_VFORK)`, which on a
/// busy machine includes the child's wait for a CPU), and runs were spread over two queues per CPU so
/// that one slow start did not hold up the others. Looking up the account of a run as another user
/// (NSS, which may ask a directory server) happens on a queue of its own too.
final class CommandLauncher: RunLauncher {
    private let executor = QueueExecutor(label: "timerd.runs", target: QueueExecutor.core)
    private let log: Logger
    private let clock: any Clock
    /// Where accounts are looked up (`RunAs`), off the runs' queue.
    private let accounts = DispatchQueue(label: "timerd.accounts")
    /// Each run's cgroup (nil: runs are tracked by process group), and the watch that says when one is
    /// empty (its handlers run on the runs' queue).
    private let cgroups: RunCgroups?

    init(log: Logger, clock: any Clock, cgroups tree: RunCgroupTree? = nil) {
        self.log = log
        self.clock = clock
        if let tree {
            do {
                cgroups = RunCgroups(tree: tree, events: try CgroupEvents(queue: executor.queue), queue: executor.queue)
            } catch {
                log.warning("runs are tracked by process group, not cgroup: cannot watch cgroups (inotify): \(error)")
                cgroups = nil
            }
        } else {
            cgroups = nil
        }
    }

    func start(_ request: RunRequest, events: @escaping @Sendable (RunEvent) -> Void) -> any RunHandle {
        let run = CommandRun(
            request: request, executor: executor, accounts: accounts, cgroups: cgroups, log: log, clock: clock, events: events)
        executor.queue.async { run.assumeIsolated { $0.begin() } }
        return run
    }
}

/// One run of a command: its child, output pipe, timers and outcome. Isolated to the launcher's queue.
actor CommandRun: RunHandle {
    nonisolated let executor: QueueExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private let request: RunRequest
    private let accounts: DispatchQueue
    private let log: Logger
    private let clock: any Clock
    private let events: @Sendable (RunEvent) -> Void

    private var child: ChildProcess?
    /// Until the child has exited: whether it reached `execve` (`Spawn.start`).
    private var exec: PendingExec?
    private var exitWatch: IOWatcher.Registration?
    /// The run's output: stdout and stderr on one pipe, or (`fail_on_stderr`) stderr on a second.
    private var streams: [OutputStream] = []
    /// With `fail_on_stderr`: the first line the run wrote to stderr, once it has written anything there.
    private var firstErrorLine: [UInt8]?
    /// `log_file`: where the output goes too, once the program has started.
    private var logFile: RunLogFile?
    private var timeoutTimer: (any DispatchSourceTimer)?
    private var killTimer: (any DispatchSourceTimer)?
    private var tail: [UInt8] = []
    private var startedMono = MonoInstant.zero
    private var timedOut = false
    private var stopReason: String?
    private var finished = false
    private let cgroups: RunCgroups?
    /// The run's own cgroup (nil: tracked by process group) and its watch.
    private var runCgroup: RunCgroup?
    private var cgroup: CgroupDirectory? { runCgroup?.directory }
    private var cgroupWatch: Int32?
    /// Whether the run's cgroup was seen empty after its main process ended: it can then be kept for the
    /// job's next run.
    private var emptied = false
    /// The OOM killer's kills in the run's cgroup so far (`memory.events`), once read.
    private var oomKills: Int?
    /// The main process's end, held while what it left in the cgroup is stopped: the run ends when the
    /// cgroup is empty.
    private var mainEnded: TerminationStatus?
    /// What the main process and the children it reaped used (`wait4`), once it has been reaped having
    /// started its program.
    private var mainUsage: ResourceUsage?
    /// The peak of timerd's memory that the child's own peak started from (`PendingExec.inheritedPeakBytes`).
    private var inheritedPeak: Int64?

    init(request: RunRequest, executor: QueueExecutor, accounts: DispatchQueue, cgroups: RunCgroups?, log: Logger,
         clock: any Clock, events: @escaping @Sendable (RunEvent) -> Void) {
        self.request = request
        self.executor = executor
        self.accounts = accounts
        self.cgroups = cgroups
        self.log = log
        self.clock = clock
        self.events = events
    }

    /// The account and identity a run as `runAs` gets, looked up now: the user's uid, its primary group (or
    /// `group=`), and every group it is in (what initgroups would set). A user or group that no longer
    /// exists fails the run; it never falls back to timerd's own identity.
    static func resolve(_ runAs: RunAs, accounts: any AccountDirectory) throws(TimerdError) -> (UserAccount, Credentials) {
        let found: UserAccount?
        switch runAs.user {
        case .named(let name):
            found = try accounts.user(named: name)
            guard found != nil else { throw TimerdError(.internal, "cannot run as user \(name): no such user (it was removed?)") }
        case .uid(let uid):
            found = try accounts.user(uid: uid)
            guard found != nil else { throw TimerdError(.internal, "cannot run as uid \(uid): no such user (it was removed?)") }
        }
        var account = found!
        if let name = runAs.group {
            guard let group = try accounts.group(named: name) else {
                throw TimerdError(.internal, "cannot run as \(account.name) with group \(name): no such group (it was removed?)")
            }
            account.gid = group.gid
        }
        return (account, Credentials(uid: account.uid, gid: account.gid, groups: try accounts.groups(of: account)))
    }

    nonisolated func stop(reason: String) {
        executor.queue.async { self.assumeIsolated { $0.terminate(reason: reason, immediately: false) } }
    }

    nonisolated func kill(reason: String) {
        executor.queue.async { self.assumeIsolated { $0.terminate(reason: reason, immediately: true) } }
    }

    // MARK: - Lifecycle

    /// Starts the run: at once, or once the account of a run as another user has been looked up.
    func begin() {
        startedMono = clock.monotonicNow
        guard let runAs = request.runAs else { return spawn(identity: nil) }
        accounts.async { [self] in
            let identity = Result { () throws(TimerdError) in try Self.resolve(runAs, accounts: SystemAccounts()) }
            executor.queue.async { self.assumeIsolated { $0.spawn(identity: identity) } }
        }
    }

    private func spawn(identity: Result<(UserAccount, Credentials), TimerdError>?) {
        if let stopReason {
            return finish(RunOutcome.Result.killed, exitCode: nil, signal: nil, reason: "\(stopReason) before it started")
        }
        let program: String
        let arguments: [String]
        switch request.action {
        case .shell(let line):
            program = "/bin/sh"
            // A run's own arguments are the shell's $1, $2, … ($0 is the job's name).
            arguments = ["-c", line] + (request.extraArguments.isEmpty ? [] : [request.job] + request.extraArguments)
        case .argv(let words):
            program = words[0]
            arguments = Array(words.dropFirst()) + request.extraArguments
        case .webhook:
            // ActionLauncher sends webhooks to the webhook launcher; reaching here is a bug.
            return finish(.failed, exitCode: nil, signal: nil, reason: "internal error: a webhook given to the command launcher")
        }
        var environment = request.environment
        var credentials: Credentials?
        switch identity {
        case nil:
            break
        case .failure(let error):
            return finish(.failed, exitCode: nil, signal: nil, reason: error.message)
        case .success(let (account, resolved)):
            credentials = resolved
            let path = account.uid == 0 ? Daemon.rootPath : RunAs.userPath
            for (key, value) in [("HOME", account.home), ("USER", account.name), ("LOGNAME", account.name), ("PATH", path)]
            where environment[key] == nil {
                environment[key] = value
            }
        }
        // One pipe for stdout and stderr (their lines interleave as written), or two with `fail_on_stderr`.
        var pipes: [(read: FileDescriptor, write: FileDescriptor)] = []
        func closePipes() {
            for pipe in pipes {
                try? pipe.read.close()
                try? pipe.write.close()
            }
        }
        do {
            for _ in 0..<(request.failOnStderr ? 2 : 1) { pipes.append(try FileDescriptor.makePipe(nonBlockingRead: true)) }
        } catch {
            closePipes()
            return finish(.failed, exitCode: nil, signal: nil, reason: "cannot create the output pipe: \(error)")
        }
        let cgroupDirectory: FileDescriptor?
        do {
            cgroupDirectory = try takeCgroup()
        } catch {
            closePipes()
            return finish(.failed, exitCode: nil, signal: nil, reason: error.description)
        }
        let child: ChildProcess
        do {
            (child, exec) = try Spawn.start(
                program: program, arguments: arguments, environment: environment,
                workingDirectory: request.workingDirectory, credentials: credentials, output: pipes[0].write,
                errors: pipes.count > 1 ? pipes[1].write : nil, cgroup: cgroupDirectory, settings: request.resources)
        } catch {
            try? cgroupDirectory?.close()
            closePipes()
            return finish(.failed, exitCode: nil, signal: nil, reason: "\(error)")
        }
        try? cgroupDirectory?.close()
        self.child = child
        events(.started(pid: child.pid))
        if let settings = request.logFile {
            logFile = RunLogFile(settings, job: request.job, run: request.runID, started: clock.now().wall, log: log)
        }

        let queue = executor.queue
        do {
            for (index, pipe) in pipes.enumerated() {
                let watch = try IOWatcher.shared.watch(pipe.read, for: .readable, on: queue) { [self] _ in
                    self.assumeIsolated { $0.readOutput(index) }
                }
                // The write end stays open here until the run ends, so the pipe never reports the end of
                // its output: the child's exit would report it just before its pidfd does, two wake-ups of
                // the loop's thread for one end (what is left is read when the exit is seen, `complete`).
                streams.append(OutputStream(watch: watch, writeEnd: pipe.write))
            }
            exitWatch = try IOWatcher.shared.watch(child.pidfd, for: .readable, on: queue) { [self] _ in
                self.assumeIsolated { $0.childExited() }
            }
        } catch {
            // Cannot watch: stop the child rather than lose track of it.
            _ = try? ProcessControl.signalProcessGroup(child.pid, .kill)
            _ = try? child.waitExit(blocking: true)
            for index in pipes.indices {
                if index < streams.count {
                    closeOutput(index)
                } else {
                    try? pipes[index].read.close()
                    try? pipes[index].write.close()
                }
            }
            try? child.pidfd.close()
            self.child = nil
            return finish(.failed, exitCode: nil, signal: nil, reason: "cannot watch the process: \(error)")
        }

        if let timeout = request.timeout {
            timeoutTimer = makeTimer(after: timeout) { run in
                run.timedOut = true
                run.log.warning(job: run.request.job, run: run.request.runID,
                                "timed out after \(DurationText.format(timeout)); sending SIGTERM to \(run.termTarget)")
                run.signal(.term, toAll: run.request.killMode == .controlGroup)
                run.scheduleKill()
            }
        }
    }

    private func terminate(reason: String, immediately: Bool) {
        guard !finished else { return }
        if stopReason == nil { stopReason = reason }
        guard child != nil else { return }  // not spawned yet: `spawn` sees `stopReason` and does not start it
        if immediately {
            signal(.kill, toAll: request.killMode != .process)
        } else {
            log.info(job: request.job, run: request.runID, "stopping: \(reason); sending SIGTERM to \(termTarget)")
            signal(.term, toAll: request.killMode == .controlGroup)
            scheduleKill()
        }
    }

    /// The run is being stopped (a timeout, or `stop`): its SIGTERM has been sent.
    private var stopping: Bool { timedOut || (stopReason != nil && child != nil) }

    /// Who SIGTERM goes to under the run's `kill_mode`, for the log.
    private var termTarget: String {
        request.killMode == .controlGroup ? "its process group" : "its main process"
    }

    private func scheduleKill() {
        guard killTimer == nil else { return }
        killTimer = makeTimer(after: request.killGrace) { run in
            run.log.warning(job: run.request.job, run: run.request.runID,
                            "still running \(DurationText.format(run.request.killGrace)) after SIGTERM; sending SIGKILL")
            run.signal(.kill, toAll: run.request.killMode != .process)
        }
    }

    /// `signal` to the whole run (everything in its cgroup, or its process group) or to its main process
    /// only. The main process is not reaped until `childExited`, so its pid (= the group id) cannot be
    /// reused here; once it is, only the cgroup is left to signal.
    private func signal(_ signal: Signal, toAll: Bool) {
        guard let child, !finished else { return }
        if let cgroup {
            guard toAll else {
                if mainEnded == nil { _ = try? child.signal(signal) }
                return
            }
            if signal == .kill { try? cgroup.kill() } else { cgroup.signalAll(signal) }
        } else if toAll {
            _ = try? ProcessControl.signalProcessGroup(child.pid, signal)
        } else {
            _ = try? child.signal(signal)
        }
    }

    /// The run's cgroup (`RunCgroups.take`: the job's idle one, or a new `runs/JOB@N`), open for the spawn;
    /// without cgroups, nothing. It is watched only if its main process ends leaving something in it
    /// (`watchCgroup`): a watch from the start cost two more system calls a run and woke the loop as the
    /// cgroup filled and emptied.
    private func takeCgroup() throws(RunCgroups.Failure) -> FileDescriptor? {
        let limits = request.resources.cgroupFiles
        guard let cgroups else {
            // Checked when the job was added; the config or timerd's cgroup may have changed since.
            guard limits.isEmpty else {
                throw RunCgroups.Failure(description: "\(request.resources.cgroupSettings[0].key) needs a cgroup for the run, and runs have none here")
            }
            return nil
        }
        let (taken, handle) = try cgroups.take(job: request.job, limits: limits)
        runCgroup = taken
        return handle
    }

    /// Watches the run's cgroup until it is empty (`cgroupChanged`), once its main process has ended and
    /// left something in it. False (and a warning) if it cannot be watched.
    private func watchCgroup(_ cgroup: CgroupDirectory) -> Bool {
        guard let cgroups else { return false }
        do {
            cgroupWatch = try cgroups.events.watch(cgroup) { [self] in
                self.assumeIsolated { $0.cgroupChanged() }
            }
            return true
        } catch {
            log.warning(job: request.job, run: request.runID,
                        "cannot watch the run's cgroup \(cgroup) (\(error)): killing what its main process left in it")
            return false
        }
    }

    /// Something in the run's cgroup changed: once the main process has ended and the cgroup is empty,
    /// the run ends.
    private func cgroupChanged() {
        guard let mainEnded, !finished, let cgroup, (try? cgroup.isPopulated()) == false else { return }
        emptied = true
        complete(mainEnded)
    }

    /// The main process has exited (and is reaped): what it left in its process group is stopped as
    /// `kill_mode` says, behind the run's end (nothing tells when a process group is empty): under
    /// `control-group` SIGTERM, then SIGKILL after `kill_grace`; under `mixed` SIGKILL at once; under
    /// `process` nothing. The group id stays taken while any member is left, so no other process
    /// can be hit.
    private func stopWhatWasLeft(group: Int32) {
        switch request.killMode {
        case .process:
            return
        case .mixed:
            guard (try? ProcessControl.signalProcessGroup(group, .kill)) == true else { return }  // nothing left
            log.info(job: request.job, run: request.runID,
                     "its main process ended; sent SIGKILL to what it left in its process group (kill_mode=mixed)")
        case .controlGroup:
            // A run being stopped had its SIGTERM with the main process: a second one could mean "now,
            // without cleaning up" to a program that handles the first. Only its SIGKILL is left to send.
            if stopping {
                guard (try? ProcessControl.signalProcessGroup(group, Signal(rawValue: 0))) == true else { return }
            } else {
                guard (try? ProcessControl.signalProcessGroup(group, .term)) == true else { return }  // nothing left
                log.info(job: request.job, run: request.runID,
                         "its main process ended; sent SIGTERM to what it left in its process group, SIGKILL in "
                         + "\(DurationText.format(request.killGrace)) (kill_mode=control-group)")
            }
            let grace = request.killGrace
            executor.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(grace.nanoseconds))) {
                _ = try? ProcessControl.signalProcessGroup(group, .kill)
            }
        }
    }

    private func makeTimer(after delay: Duration, _ body: @escaping @Sendable (isolated CommandRun) -> Void) -> any DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: executor.queue)
        timer.schedule(deadline: .now() + .nanoseconds(Int(delay.nanoseconds)))
        timer.setEventHandler { [self] in self.assumeIsolated { body($0) } }
        timer.activate()
        return timer
    }

    // MARK: - Output

    /// One output pipe of the run and the line it is in the middle of.
    struct OutputStream {
        var watch: IOWatcher.Registration?
        /// timerd's copy of the pipe's write end, closed with the stream.
        var writeEnd: FileDescriptor?
        var partialLine: [UInt8] = []
    }

    /// Reads what is waiting on stream `index`, `chunks` reads of 64 KiB at most: every run shares the
    /// queue, and a job writing faster than that gets the rest read on a later turn (the watch fires again).
    private func readOutput(_ index: Int, chunks: Int = 4) {
        guard index < streams.count, let watch = streams[index].watch else { return }
        for _ in 0..<chunks {
            let chunk: [UInt8]?
            do { chunk = try watch.fd.tryRead(upToCount: 65_536) } catch { chunk = [] }
            guard let chunk else { return }  // drained for now
            if chunk.isEmpty {  // EOF: every writer closed its end (not while timerd holds one)
                flushPartialLine(index)
                closeOutput(index)
                return
            }
            absorb(chunk, index)
        }
    }

    /// Every stream: what is left to read (up to `chunks` reads each), and closed.
    private func drainOutput(chunks: Int) {
        for index in streams.indices {
            readOutput(index, chunks: chunks)
            flushPartialLine(index)
            closeOutput(index)
        }
    }

    private func closeOutput(_ index: Int) {
        guard index < streams.count, let watch = streams[index].watch else { return }
        IOWatcher.shared.cancel(watch)
        try? watch.fd.close()
        try? streams[index].writeEnd?.close()
        streams[index].watch = nil
        streams[index].writeEnd = nil
    }

    /// Stream 1, when there is one, is stderr kept apart (`fail_on_stderr`).
    private func absorb(_ chunk: [UInt8], _ stream: Int) {
        if stream == 1, firstErrorLine == nil {
            firstErrorLine = Array(chunk.prefix { $0 != UInt8(ascii: "\n") }.prefix(200))
        }
        tail.append(contentsOf: chunk)
        if tail.count > Limits.outputTailBytes { tail.removeFirst(tail.count - Limits.outputTailBytes) }
        logFile?.append(chunk)
        var start = chunk.startIndex
        for index in chunk.indices where chunk[index] == UInt8(ascii: "\n") {
            streams[stream].partialLine.append(contentsOf: chunk[start..<index])
            logLine(streams[stream].partialLine)
            streams[stream].partialLine.removeAll(keepingCapacity: true)
            start = index + 1
        }
        streams[stream].partialLine.append(contentsOf: chunk[start...])
        if streams[stream].partialLine.count > Limits.maxLoggedLineBytes {
            logLine(streams[stream].partialLine)
            streams[stream].partialLine.removeAll(keepingCapacity: true)
        }
    }

    private func flushPartialLine(_ index: Int) {
        guard index < streams.count else { return }
        if !streams[index].partialLine.isEmpty { logLine(streams[index].partialLine) }
        streams[index].partialLine.removeAll()
    }

    private func logLine(_ bytes: [UInt8]) {
        var line = bytes
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        let text = String(decoding: line.prefix(Limits.maxLoggedLineBytes), as: UTF8.self)
        log.info(job: request.job, run: request.runID, "| " + text + (line.count > Limits.maxLoggedLineBytes ? " […]" : ""))
    }

    // MARK: - Exit

    private func childExited() {
        guard let child, !finished, mainEnded == nil else { return }
        let status: TerminationStatus
        let usage: ResourceUsage
        do {
            guard let ended = try child.waitExitWithUsage() else { return }  // spurious wake-up
            (status, usage) = ended
        } catch {
            return finish(.failed, exitCode: nil, signal: nil, reason: "lost track of the process: \(error)")
        }
        if let failure = exec?.outcome() {  // it exited before its execve: nothing of the program ran
            for index in streams.indices { closeOutput(index) }
            return finish(.failed, exitCode: nil, signal: nil, reason: failure.description)
        }
        mainUsage = usage
        inheritedPeak = exec?.inheritedPeakBytes
        if let cgroup {
            // What the main process left in the cgroup is stopped as `kill_mode` says, and the run ends when
            // the cgroup is empty; under `process` it is left alone and the run ends now.
            let populated = try? cgroup.isPopulated()
            emptied = populated == false
            if request.killMode != .process, populated == true {
                mainEnded = status
                // Reaped: its pidfd stays readable, and nothing more is to be learnt from it.
                if let exitWatch {
                    IOWatcher.shared.cancel(exitWatch)
                    try? exitWatch.fd.close()
                    self.exitWatch = nil
                }
                if request.killMode == .mixed {
                    log.info(job: request.job, run: request.runID, "its main process ended; killing what it left in its cgroup (kill_mode=mixed)")
                    try? cgroup.kill()
                } else if !stopping {
                    log.info(job: request.job, run: request.runID,
                             "its main process ended; sending SIGTERM to what it left in its cgroup (kill_mode=control-group)")
                    cgroup.signalAll(.term)
                    scheduleKill()
                }  // else it had its SIGTERM with the main process, and its SIGKILL is scheduled
                guard watchCgroup(cgroup) else {
                    // Nothing would say when it is empty: what is left is killed, and the run ends now.
                    try? cgroup.kill()
                    return complete(status)
                }
                // It may have emptied meanwhile, before the watch saw anything.
                return cgroupChanged()
            }
        } else {
            stopWhatWasLeft(group: child.pid)
        }
        complete(status)
    }

    /// The run's outcome once its main process has ended with `status` (and, with a cgroup, what it left
    /// is gone or left alone).
    private func complete(_ status: TerminationStatus) {
        // Take what the child wrote before it ended (up to 1 MiB more). Without a cgroup, a background
        // grandchild that keeps the pipe open does not hold the run: the run ends with its main process.
        drainOutput(chunks: 16)

        if !timedOut, stopReason == nil, let limit = memoryLimitKills() {
            switch status {
            case .exited(let code):
                return finish(.killed, exitCode: Int(code), signal: nil, reason: "\(limit); exited with status \(code)")
            case .signaled(let signal):
                return finish(.killed, exitCode: nil, signal: Int(signal.rawValue), reason: "\(limit); killed by \(signal)")
            }
        }
        switch status {
        case .exited(let code):
            if timedOut {
                finish(.timeout, exitCode: Int(code), signal: nil,
                       reason: "timed out after \(DurationText.format(request.timeout ?? .zero)); exited with status \(code)")
            } else if let stopReason {
                finish(.killed, exitCode: Int(code), signal: nil, reason: "\(stopReason); exited with status \(code)")
            } else if !request.successExitCodes.contains(Int(code)) {
                finish(.failed, exitCode: Int(code), signal: nil, reason: "exited with status \(code)"
                       + (request.successExitCodes == [0] ? "" : " (not one of success_exit_codes=\(ExitCodes.format(request.successExitCodes)))"))
            } else if let line = firstErrorLine {
                finish(.failed, exitCode: Int(code), signal: nil,
                       reason: "exited with status \(code) but wrote to stderr (fail_on_stderr): \(String(decoding: line, as: UTF8.self))")
            } else {
                finish(.ok, exitCode: Int(code), signal: nil, reason: "exited with status \(code)")
            }
        case .signaled(let signal):
            if timedOut {
                finish(.timeout, exitCode: nil, signal: Int(signal.rawValue),
                       reason: "timed out after \(DurationText.format(request.timeout ?? .zero)); killed by \(signal)")
            } else if let stopReason {
                finish(.killed, exitCode: nil, signal: Int(signal.rawValue), reason: "\(stopReason); killed by \(signal)")
            } else {
                finish(.killed, exitCode: nil, signal: Int(signal.rawValue), reason: "killed by \(signal)")
            }
        }
    }

    /// "killed by its memory limit (memory_max=512M): the OOM killer ended 1 process" when the kernel killed
    /// something in the run's cgroup for its memory limit (`memory.events`: `oom_kill`), else nil.
    private func memoryLimitKills() -> String? {
        guard let runCgroup, let total = readOOMKills() else { return nil }
        oomKills = total
        // The cgroup's count since it was made; earlier runs of the job in it had theirs.
        let kills = total - runCgroup.before.oomKills
        guard kills > 0 else { return nil }
        let limits = request.resources.options.filter { $0.key.hasPrefix("memory_") }.map { "\($0.key)=\($0.value)" }
        return "killed by its memory limit (\(limits.joined(separator: ", "))): the OOM killer ended \(kills) process"
            + (kills == 1 ? "" : "es")
    }

    private func finish(_ result: RunOutcome.Result, exitCode: Int?, signal: Int?, reason: String) {
        guard !finished else { return }
        finished = true
        // Already read and closed when it ended normally (`complete`); timerd holds the write ends, so
        // nothing else would close them.
        for index in streams.indices { closeOutput(index) }
        if let exitWatch {
            IOWatcher.shared.cancel(exitWatch)
            try? exitWatch.fd.close()
            self.exitWatch = nil
        }
        timeoutTimer?.cancel()
        killTimer?.cancel()
        let counters = runCgroup.map(readCounters)
        let usage = usage(counters)
        if let runCgroup, let cgroups, let counters {
            if let cgroupWatch { cgroups.events.forget(cgroupWatch) }
            cgroupWatch = nil
            // Kept only where what the next run uses can be told from what this one did.
            let counted = counters.cpu != nil && (counters.ioRead != nil || !(cgroups.tree.controllers.contains("io")))
            if emptied, counted { cgroups.keep(runCgroup, counters: counters) } else { cgroups.release(runCgroup) }
            self.runCgroup = nil
        }
        let now = clock.now()
        let outcome = RunOutcome(
            result: result, exitCode: exitCode, signal: signal, reason: reason,
            output: String(decoding: tail, as: UTF8.self), finishedWall: now.wall, duration: now.mono - startedMono,
            usage: usage)
        logFile?.end(outcome)
        logFile = nil
        events(.finished(outcome))
    }

    /// The main process's largest resident set as `wait4` gives it, if it is the program's own. The child
    /// shares timerd's memory until its `execve`, and Linux carries that memory's peak over into the
    /// child's (`exec_mmap`: `setmax_mm_hiwater_rss`), so a figure no larger than that peak, which the child
    /// noted just before its `execve` (`inherited`), may be timerd's: unknown (nil). A larger one can only
    /// be the program's, or of a process it reaped. (timerd's `VmHWM` read at the run's end is not a bound:
    /// it can be lower than the peak the child carried over, which a loaded test run showed.)
    static func ownPeak(_ maxResident: Int64, inherited: Int64?) -> Int64? {
        guard let inherited else { return nil }
        // 1 MiB of slack: timerd's other threads may grow its memory between the note and the execve.
        return maxResident > inherited + (1 << 20) ? maxResident : nil
    }

    /// The OOM killer's kills in the run's cgroup since it was made (`memory.events`), where the run has a
    /// memory limit.
    private func readOOMKills() -> Int? {
        guard let cgroup, request.resources.memoryMax != nil || request.resources.memorySwapMax != nil,
              let kills = try? cgroup.number("oom_kill", in: "memory.events") else { return nil }
        return Int(kills)
    }

    /// The run's cgroup's counters now (`RunCgroupCounters`): what the cgroup says less what it said when
    /// the run began is what the run used. Only the files of controllers the runs have are read (`cpu.stat`
    /// is always there): looking up one that is not there takes the same lock of the cgroup file system as
    /// every `mkdir` of a run's cgroup (docs/performance.md, "Runs in cgroups (round 15)").
    private func readCounters(_ runCgroup: RunCgroup) -> RunCgroupCounters {
        let controllers = cgroups?.tree.controllers ?? []
        let io = controllers.contains("io") ? runCgroup.directory.ioBytes() : nil
        return RunCgroupCounters(
            cpu: runCgroup.directory.cpuUsage(),
            ioRead: io?.read, ioWritten: io?.written,
            // Read in `complete` unless the run was stopped; the next run's kills are counted from here.
            oomKills: oomKills ?? readOOMKills() ?? runCgroup.before.oomKills)
    }

    /// What the run used, once it has ended having started its program: everything in its cgroup where it
    /// has one (`counters` less the cgroup's counters when the run began; what the cgroup cannot say, the
    /// main process and what it reaped).
    private func usage(_ counters: RunCgroupCounters?) -> RunUsage {
        guard let main = mainUsage else { return RunUsage() }
        let controllers = cgroups?.tree.controllers ?? []
        guard let runCgroup, let counters else {
            return RunUsage(
                cpu: main.cpu, memoryPeakBytes: Self.ownPeak(main.maxResidentBytes, inherited: inheritedPeak),
                ioReadBytes: main.blocksReadBytes, ioWriteBytes: main.blocksWrittenBytes)
        }
        let before = runCgroup.before
        // A reused cgroup's own `memory.peak` is its runs' together: only the one reset for this run will do.
        let memoryPeak: Int64?
        if !controllers.contains("memory") {
            memoryPeak = nil
        } else if let peak = runCgroup.peak {
            memoryPeak = CgroupDirectory.peak(peak)
        } else {
            memoryPeak = runCgroup.directory.memoryPeak()
        }
        return RunUsage(
            cpu: counters.cpu.map { $0 - (before.cpu ?? .zero) } ?? main.cpu,
            memoryPeakBytes: memoryPeak ?? Self.ownPeak(main.maxResidentBytes, inherited: inheritedPeak),
            ioReadBytes: counters.ioRead.map { $0 - (before.ioRead ?? 0) } ?? main.blocksReadBytes,
            ioWriteBytes: counters.ioWritten.map { $0 - (before.ioWritten ?? 0) } ?? main.blocksWrittenBytes)
    }
}
