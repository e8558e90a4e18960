import Dispatch
import Synchronization
import TimerdConfig
import TimerdCore
import TimerdEngine
import TimerdHost
import TimerdProtocol
import TimerdStore
import TimerdSystem

/// The running service and its supervisor: wires the registry, the launchers, the cluster session and the
/// control server together, starts them in order, reloads, and stops them in reverse in bounded phases.
///
/// An actor on a serial queue of its own, like every long-lived part of timerd: signals and `RELOAD`
/// reach it as work on that queue, and nothing it does runs on the global concurrent executor.
public actor Daemon {
    nonisolated let executor = QueueExecutor(label: "timerd.supervisor")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    private let log: Logger
    private let sink: QueuedLogSink
    private let registry: Registry
    private let configPath: String?
    private let configPathExplicit: Bool
    private let settings: Locked<DaemonSettings>
    private let access: AccessControl
    private let server: Locked<ControlServer?> = Locked(nil)
    private let memory = IdleMemory()
    /// Cluster mode's etcd session (`docs/cluster.md`); nil on a single host.
    private let cluster: Locked<ClusterNode?> = Locked(nil)
    private var stopping = false
    /// Rewrites the metrics file (nil without `metrics_file`).
    private var metricsTimer: (any DispatchSourceTimer)?
    /// Every part of the daemon reads the time from this one clock.
    private let clock: any Clock
    /// The same clock when it is the test clock (failpoint `test-clock`), so SIGUSR2 can set it.
    private let testClock: SteppedClock?

    /// `timerd`'s entry point: parses `arguments` (without the program name), then runs until stopped.
    public static func main(arguments: [String]) -> Never {
        // Before `IOWatcher.shared` and the registry's lane (`QueueExecutor.core`) exist: the main thread
        // will run the loop, and the lane on the main queue (the end of this function).
        IOWatcher.onMainThread.store(true, ordering: .releasing)
        let options: DaemonOptions
        do {
            options = try DaemonOptions.parse(arguments)
        } catch {
            CurrentProcess.writeToStderr("timerd: error: \(error.message)\nSee 'timerd --help'.\n")
            CurrentProcess.exit(2)
        }
        if options.showHelp {
            print(DaemonOptions.usage)
            CurrentProcess.exit(0)
        }
        if options.showVersion {
            print("timerd \(ControlHandler.version) (protocol \(ControlHandler.protocolVersion))")
            CurrentProcess.exit(0)
        }

        let configPath = options.config ?? DaemonOptions.defaultConfig
        let configuration: Configuration
        switch HostConfig.load(path: configPath, explicit: options.config != nil) {
        case .success(let loaded):
            configuration = loaded
        case .failure(let errors):
            for diagnostic in errors.diagnostics { CurrentProcess.writeToStderr("\(diagnostic)\n") }
            if !options.checkConfig { CurrentProcess.writeToStderr("timerd: the config is invalid; not starting\n") }
            CurrentProcess.exit(1)
        }
        if options.checkConfig {
            let files = configuration.files.isEmpty ? "no config file (\(configPath) is missing)" : configuration.files.joined(separator: ", ")
            print("config OK: \(configuration.jobs.count.counted("job")) in \(files)")
            CurrentProcess.exit(0)
        }

        let socket = options.socket
            ?? CurrentProcess.environmentVariable("TIMERD_SOCKET").flatMap { $0.isEmpty ? nil : $0 }
            ?? configuration.settings.socket
            ?? DaemonOptions.defaultSocket()
        // Before any other thread exists: every thread inherits the block, so SIGTERM, SIGINT and SIGHUP stay
        // pending until the signal thread takes them with sigwait, and none can be lost. (With Dispatch signal
        // sources under dispatchMain(), whose main thread waits in sigsuspend with every signal unblocked,
        // a SIGTERM sent soon after start-up was seen to vanish.)
        // Test hook, documented in docs/systemd.md: with TIMERD_TEST_FAILPOINTS=wedge-registry-on-usr1,
        // SIGUSR1 blocks the registry's queue forever (to prove the watchdog). Never set in production.
        let wedgeHook = Self.failpoints.contains("wedge-registry-on-usr1")
        // Test hook, documented in docs/schedules.md: with TIMERD_TEST_FAILPOINTS=test-clock the daemon's
        // wall clock starts at the RFC 3339 time in the file TIMERD_TEST_CLOCK_FILE, and SIGUSR2 sets it to
        // the time the file holds then (a clock step, as settimeofday would make). Never set in production.
        let testClock = Self.failpoints.contains("test-clock") ? SteppedClock() : nil
        if let testClock { Self.readTestClock(into: testClock) }
        let handled: [Signal] = [.term, .int, .hup] + (wedgeHook ? [.usr1] : []) + (testClock != nil ? [.usr2] : [])
        do {
            try Signals.ignore(.pipe)
            // systemd's watchdog ends a hung timerd with SIGABRT. The Swift runtime's crash backtracer
            // catches SIGABRT, and when it cannot suspend a wedged thread the process carried on (seen
            // under systemd 252: the restart came only after TimeoutAbortSec). Default action: die now.
            try Signals.restoreDefault(.abrt)
            // SIGCHLD too, though nothing waits for it (runs end through their pidfds): a child's SIGCHLD is
            // sent to the thread that spawned it, a Dispatch worker that blocks it, so it is not discarded
            // as an ignored signal but made pending for the process, and it woke the one thread that did
            // not block it, this one, out of sigwait: once per run (880 times a second at 1,000 fires/s).
            // Blocked everywhere, it stays pending and wakes nobody; a spawned command starts with an
            // empty mask and no pending signals.
            try Signals.block(handled + [.chld])
        } catch {
            CurrentProcess.writeToStderr("timerd: cannot set up signal handling: \(error)\n")
            CurrentProcess.exit(1)
        }
        // Also before any other thread exists, so that every thread inherits it: a short scheduling slice,
        // so the threads that deliver a due timer and start its run preempt whatever runs (other jobs'
        // commands, mostly) instead of waiting up to its slice. Commands get the scheduling timerd had.
        let slice = Result { () throws(Errno) in try CurrentProcess.requestSchedulingSlice(nanoseconds: Self.schedulingSlice) }
        // Durable state: jobs added at run time and run history (docs/state.md). A database that cannot be
        // read is moved aside by the store and reported; a directory that cannot be used stops start-up.
        let stateDirectory = options.stateDirectory ?? DaemonOptions.defaultStateDirectory()
        let opened: (store: StateStore, recovered: String?)
        do {
            // Test hook, documented in docs/state.md: with TIMERD_TEST_FAILPOINTS=store-io-error, every
            // write fails as an I/O error would while the file TIMERD_TEST_STORE_FAULT_FILE exists.
            let faultFile = Self.failpoints.contains("store-io-error")
                ? CurrentProcess.environmentVariable("TIMERD_TEST_STORE_FAULT_FILE") : nil
            opened = try StateStore.open(directory: stateDirectory, faultFile: faultFile)
        } catch {
            // Under systemd, `systemctl status timerd` shows why it did not start.
            Notifier.status("cannot use the state directory \(stateDirectory): \(error.message)")
            CurrentProcess.writeToStderr("timerd: cannot use the state directory \(stateDirectory): \(error.message)\n")
            CurrentProcess.exit(1)
        }
        // A cgroup for each run, in timerd's own (docs/architecture.md, "Runs"), before anything can run.
        let cgroups = RunCgroupTree.setUp()
        let daemon = Daemon(configPath: configPath, explicit: options.config != nil, configuration: configuration,
                            store: opened.store, clock: testClock ?? HostClock(), testClock: testClock,
                            cgroups: cgroups)
        if let recovered = opened.recovered { daemon.log.error(recovered) }
        // Resource settings of config jobs and per-user ceilings that this host cannot give a run.
        let unsupported = Self.unsupportedResources(configuration, RunResourceSupport(cgroups))
        if !unsupported.isEmpty {
            for line in unsupported { CurrentProcess.writeToStderr("\(line)\n") }
            CurrentProcess.writeToStderr("timerd: the config is invalid; not starting\n")
            CurrentProcess.exit(1)
        }
        switch cgroups {
        case .success(let tree):
            let controllers = tree.controllers.isEmpty ? "none" : tree.controllers.sorted().joined(separator: ", ")
            daemon.log.info("runs: each in a cgroup of its own under \(tree.runs) (timerd itself in \(tree.own)/supervisor; "
                            + "controllers for their limits: \(controllers))")
            for line in tree.sweep() { daemon.log.warning("runs: \(line)") }
        case .failure(let unavailable):
            daemon.log.notice("runs: tracked by process group, not by cgroup: \(unavailable); what a run starts in a new "
                              + "session or process group (setsid) is out of reach when it is stopped")
        }
        daemon.raiseOpenFileLimit()
        daemon.reportSchedulingSlice(slice)
        daemon.log.info("state in \(stateDirectory)/state.db")
        daemon.submit { await $0.start(socket: socket, configuration: configuration) }
        // Signals are taken by a thread of their own; the main thread runs the event loop, and with it the
        // registry's and the runs' work (`IOWatcher.runOnMainThread`, docs/architecture.md "Concurrency").
        do {
            try CurrentProcess.detachThread {
                while true {
                    do {
                        daemon.received(try Signals.waitForAny(handled))
                    } catch {
                        // sigwait fails only for an invalid signal set: a bug, not an environment failure.
                        preconditionFailure("sigwait failed: \(error)")
                    }
                }
            }
        } catch {
            CurrentProcess.writeToStderr("timerd: cannot start the signal thread: \(error)\n")
            CurrentProcess.exit(1)
        }
        IOWatcher.shared.runOnMainThread()
    }

    /// `file:line: problem` for each config job, and each `[daemon] user_KEY` ceiling, whose resource settings
    /// a run cannot have here (a cgroup controller timerd's cgroup lacks, or no cgroup for runs at all).
    static func unsupportedResources(_ configuration: Configuration, _ support: RunResourceSupport) -> [String] {
        var lines: [String] = []
        for job in configuration.jobs {
            if let problem = support.problem(job.spec.resources) { lines.append("\(job.file):\(job.line): \(problem.message)") }
        }
        let ceiling = configuration.settings.access.userCeiling
        if let problem = support.problem(ceiling, as: { "user_" + $0 }) {
            let key = problem.key.map { String($0.dropFirst(5)) } ?? ""
            lines.append("\(configuration.settings.access.userCeilingDeclared[key] ?? "[daemon]"): \(problem.message)")
        }
        return lines
    }

    /// Handles a signal taken by the signal thread (never blocks it).
    private nonisolated func received(_ signal: Signal) {
        switch signal {
        case .hup:
            submit { _ = try? await $0.reload(trigger: "SIGHUP") }
        case .usr1:
            registry.wedgeForTesting()
        case .usr2:
            guard let testClock else { return }
            Self.readTestClock(into: testClock)
            registry.enqueue { $0.wallClockChanged(reason: "test clock set") }
        default:
            submit { await $0.stop(signal: signal) }
        }
    }

    /// Runs `operation` on the supervisor's own queue.
    nonisolated func submit(_ operation: @escaping @Sendable (isolated Daemon) async -> Void) {
        executor.queue.async { self.assumeIsolated { $0.spawn(operation) } }
    }

    private func spawn(_ operation: @escaping @Sendable (isolated Daemon) async -> Void) {
        // Isolated to this actor: the task starts and resumes on the supervisor's queue.
        Task { await operation(self) }
    }

    private init(configPath: String, explicit: Bool, configuration: Configuration, store: StateStore, clock: any Clock,
                 testClock: SteppedClock?, cgroups: Result<RunCgroupTree, RunCgroupTree.Unavailable>) {
        self.clock = clock
        self.testClock = testClock
        let target = configuration.settings.log == "auto"
            ? LogTarget.automatic() : LogTarget(rawValue: configuration.settings.log) ?? .stderr
        sink = QueuedLogSink(target: target, clock: clock)
        log = Logger(sink: sink, minimum: CurrentProcess.environmentVariable("TIMERD_DEBUG") == nil ? .info : .debug)
        self.configPath = configPath
        configPathExplicit = explicit
        settings = Locked(configuration.settings)
        access = AccessControl(configuration.settings.access)
        registry = Registry(
            launcher: ActionLauncher(
                commands: CommandLauncher(log: log, clock: clock, cgroups: try? cgroups.get()),
                webhooks: WebhookLauncher(
                    log: log, clock: clock, library: Self.failpoints.contains("no-libcurl") ? "libcurl-absent.so" : "libcurl.so.4")),
            log: log, maxRunning: configuration.settings.maxRunning,
            baseEnvironment: Self.baseEnvironment(), store: store, access: access, clock: clock,
            runTracking: {
                switch cgroups {
                case .success(let tree): DaemonStats.RunTracking(by: "cgroup", cgroups: tree.runs.path, controllers: tree.controllers.sorted())
                case .failure(let unavailable): DaemonStats.RunTracking(by: "process-group", reason: unavailable.description)
                }
            }(),
            resourceSupport: RunResourceSupport(cgroups))
    }

    /// The scheduling slice timerd's threads ask for: 0.3 ms, shorter than the kernel's default on any
    /// host (0.7 ms × (1 + log₂ CPUs)), so a thread that wakes still preempts a command, and long enough
    /// for the loop's thread to handle a fire and the end of a run (about 0.3 ms at 1,000 fires/s) in one
    /// turn: with the shortest Linux gives (0.1 ms) a command on the same CPU took over part-way
    /// (docs/performance.md, "Fire to command (round 9)" and "(round 17)").
    static let schedulingSlice: UInt64 = 300_000

    private nonisolated func reportSchedulingSlice(_ result: Result<Void, Errno>) {
        switch result {
        case .success:
            log.debug("scheduling: threads ask for a \(DurationText.format(.nanoseconds(Int64(Self.schedulingSlice)))) slice; commands get timerd's own scheduling")
        case .failure(.notSupported):
            log.info("scheduling: a realtime or deadline policy; left as it is")
        case .failure(let error):
            log.notice("scheduling: cannot ask for a short slice (\(error)): a due job can wait for a busy CPU up to the running task's slice")
        }
    }

    /// Lets timerd hold as many clients and job pipes as the hard limit allows: under systemd's default soft
    /// limit of 1,024 descriptors it would stop accepting clients at about a thousand.
    private nonisolated func raiseOpenFileLimit() {
        do {
            let limit = try CurrentProcess.raiseOpenFileLimit()
            if limit.from < limit.to {
                log.info("open files: soft limit raised from \(limit.from) to \(limit.to) (the hard limit)")
            } else {
                log.debug("open files: soft limit \(limit.from), already the hard limit")
            }
        } catch {
            log.warning("open files: cannot raise the soft limit to the hard limit: \(error)")
        }
    }

    /// The environment every run starts from: a fixed `PATH` and a few variables from the daemon's own
    /// environment, nothing else (like systemd services, unlike a login shell).
    /// Test hooks from `TIMERD_TEST_FAILPOINTS` (comma-separated; never set in production):
    /// `wedge-registry-on-usr1` (docs/systemd.md), `no-libcurl` (docs/webhooks.md), `store-io-error` and
    /// `hold-cancel-deletes` (docs/state.md).
    static let failpoints: Set<String> = Set(
        (CurrentProcess.environmentVariable("TIMERD_TEST_FAILPOINTS") ?? "").split(separator: ",").map(String.init))

    /// Sets the test clock from `TIMERD_TEST_CLOCK_FILE` (failpoint `test-clock` only).
    static func readTestClock(into clock: SteppedClock) {
        guard let path = CurrentProcess.environmentVariable("TIMERD_TEST_CLOCK_FILE"),
              let bytes = try? FileSystem.readFile(path),
              let time = try? RFC3339.parse(String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }) else {
            CurrentProcess.writeToStderr("timerd: test-clock: cannot read a time from TIMERD_TEST_CLOCK_FILE\n")
            return
        }
        clock.setWall(to: time)
    }

    /// `PATH` of runs as root (and as timerd's own user).
    static let rootPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    static func baseEnvironment() -> [KeyValue] {
        var list = [
            KeyValue("PATH", rootPath),
            KeyValue("SHELL", "/bin/sh"),
            KeyValue("HOME", CurrentProcess.environmentVariable("HOME") ?? "/"),
        ]
        for name in ["LANG", "LC_ALL", "TZ", "USER", "LOGNAME"] {
            if let value = CurrentProcess.environmentVariable(name) { list.append(KeyValue(name, value)) }
        }
        return list
    }

    // MARK: - Start

    private func start(socket: String, configuration: Configuration) async {
        await registry.watchWallClock()
        var clusterNode: ClusterNode?
        if let settings = configuration.settings.cluster {
            let node = settings.node.isEmpty ? ((try? CurrentProcess.hostname()) ?? "localhost") : settings.node
            do {
                clusterNode = try ClusterNode(settings: settings, node: node, registry: registry, log: log)
            } catch {
                fail("cannot use etcd: \(error)")
            }
            await registry.setCluster(clusterNode!)
            cluster.withLock { $0 = clusterNode }
        }

        do {
            _ = try await registry.applyConfig(configuration.jobs, maxRunning: configuration.settings.maxRunning, pools: configuration.settings.pools)
        } catch {
            fail("cannot load the config jobs: \(error.message)")
        }
        if let store = registry.store {
            do {
                let stored = try store.jobs()
                let fires = try store.configJobFires()
                await registry.restore(stored, configFires: fires)
            } catch {
                fail("cannot read the stored jobs: \(error.message)")
            }
        }

        var handler = ControlHandler(registry: registry, access: access, accounts: SystemAccounts(), reload: { [self] () async throws(TimerdError) -> ReloadSummary in
            try await self.reload(trigger: "RELOAD")
        })
        handler.cluster = clusterNode
        // After the stored jobs: etcd's shared jobs replace the cached ones once connected.
        clusterNode?.start()
        let server: ControlServer
        do {
            let registry = self.registry
            let memory = self.memory
            // The last client gone: what served its requests (worker threads' malloc arenas) is given back
            // once the registry has dealt with the connection's end (docs/performance.md, "Idle resident memory").
            let closed: @Sendable (Int, Bool) -> Void = { id, last in
                registry.enqueue { registry in
                    registry.connectionClosed(id)
                    if last { memory.release() }
                }
            }
            if let passed = try SocketActivation.listener() {
                server = ControlServer(adopting: passed, handler: handler, access: access, log: log, onConnectionClosed: closed)
            } else {
                server = try ControlServer(path: socket, handler: handler, access: access, log: log, onConnectionClosed: closed)
            }
            await server.applySocketAccess()
        } catch {
            fail("cannot listen on \(socket): \(error)")
        }
        do {
            try await server.start()
        } catch {
            fail("cannot watch the control socket: \(error)")
        }
        self.server.withLock { $0 = server }

        let counts = await registry.counts()
        let files = configuration.files.isEmpty ? "no config file" : "config \(configuration.files[0])"
        log.notice("timerd \(ControlHandler.version) ready: \(counts.jobs.counted("job")) from \(files); listening on \(server.path) (pid \(CurrentProcess.id))")
        // READY=1 only now: the socket listens and every config job is armed.
        Notifier.ready(status: await registry.statusLine())
        await registry.watchStoreHealth()
        if Notifier.enabled {
            await registry.observeStatus { Notifier.status($0) }
        }
        if let path = configuration.settings.metricsFile {
            startMetrics(path: path, every: configuration.settings.metricsInterval)
        }
        if let interval = Notifier.watchdogInterval() {
            log.info("watchdog: pinging systemd every \(DurationText.format(interval / 2)) from the registry queue")
            await registry.startWatchdog(every: interval / 2)
        }
    }

    /// Rewrites `path` with the Prometheus metrics every `interval` (`MetricsFile`), off the registry's
    /// queue.
    private func startMetrics(path: String, every interval: Duration) {
        log.info("metrics: writing \(path) every \(DurationText.format(interval))")
        let file = MetricsFile(path: path, log: log)
        let registry = self.registry
        let timer = DispatchSource.makeTimerSource(queue: file.queue)
        let nanoseconds = Int(interval.nanoseconds)
        timer.schedule(deadline: .now(), repeating: .nanoseconds(nanoseconds), leeway: .nanoseconds(nanoseconds / 10))
        timer.setEventHandler { file.write(registry) }
        timer.activate()
        metricsTimer = timer
    }

    private nonisolated func fail(_ message: String) -> Never {
        log.error(message)
        sink.flush()
        CurrentProcess.exit(1)
    }

    // MARK: - Reload

    /// Re-reads the config files and applies the difference; an invalid config changes nothing.
    func reload(trigger: String) async throws(TimerdError) -> ReloadSummary {
        guard let configPath else { return ReloadSummary() }
        log.info("reloading the config (\(trigger))")
        Notifier.reloading()
        do {
            let summary = try await reloadConfig(path: configPath)
            Notifier.ready(status: await registry.statusLine())
            return summary
        } catch {
            // Still running on the old config: systemd must see the service ready again.
            Notifier.ready(status: "reload rejected (\(error.message)); " + (await registry.statusLine()))
            throw error
        }
    }

    private func reloadConfig(path configPath: String) async throws(TimerdError) -> ReloadSummary {
        let configuration: Configuration
        switch HostConfig.load(path: configPath, explicit: configPathExplicit) {
        case .success(let loaded):
            configuration = loaded
        case .failure(let errors):
            for diagnostic in errors.diagnostics { log.error("reload rejected: \(diagnostic)") }
            throw errors.timerdError
        }
        let unsupported = Self.unsupportedResources(configuration, registry.resourceSupport)
        if !unsupported.isEmpty {
            for line in unsupported { log.error("reload rejected: \(line)") }
            throw TimerdError(.invalidConfig, unsupported.joined(separator: "; "))
        }
        let old = settings.withLock { current in
            defer {
                current.maxRunning = configuration.settings.maxRunning
                current.stopGrace = configuration.settings.stopGrace
                current.access = configuration.settings.access
            }
            return current
        }
        if old.cluster != configuration.settings.cluster {
            log.warning("the [cluster] section changed; it takes effect when timerd restarts")
        }
        if old.socket != configuration.settings.socket {
            log.warning("the [daemon] socket setting changed; it takes effect when timerd restarts")
        }
        access.update(configuration.settings.access)
        if old.access.socketGroup != configuration.settings.access.socketGroup {
            await server.withLock { $0 }?.applySocketAccess()
        }
        do {
            let summary = try await registry.applyConfig(configuration.jobs, maxRunning: configuration.settings.maxRunning, pools: configuration.settings.pools)
            // After a tzdata update: read the zone files again and move calendar jobs to the new rules.
            SystemTimeZones.forgetLoadedZones()
            await registry.reloadZones()
            log.notice("config reloaded: \(summary.added.count) added, \(summary.changed.count) changed, \(summary.removed.count) removed, \(summary.unchanged) unchanged")
            return summary
        } catch {
            log.error("reload rejected: \(error.message)")
            throw error
        }
    }

    // MARK: - Stop

    /// Stops in the reverse order of start, each phase bounded so a wedged part cannot keep timerd from
    /// exiting: stop accepting clients (and the metrics timer), leave the cluster (the lease is revoked,
    /// so the other members take its jobs over at once), let the runs finish within `stop_grace` (then SIGKILL), close the
    /// connections, wait for the state to be on disk, flush the log. A second signal while stopping kills the runs at once.
    private func stop(signal: Signal) async {
        guard !stopping else {
            log.notice("\(signal) again while stopping: killing the remaining runs now")
            await registry.killAllRuns(reason: "timerd was told to stop twice")
            return
        }
        stopping = true
        log.notice("\(signal) received: stopping")
        let grace = settings.withLock { $0.stopGrace }
        let counts = await registry.counts()
        Notifier.stopping(status: counts.running == 0 ? "stopping" : "stopping: waiting up to \(DurationText.format(grace)) for \(counts.running.counted("running job"))")
        if counts.running > 0 {
            // Room for the grace period plus the SIGKILL that may follow it, whatever TimeoutStopSec= says.
            Notifier.extendTimeout(by: grace + .seconds(5))
        }
        metricsTimer?.cancel()
        let server = self.server.withLock { $0 }
        let registry = self.registry
        await phase("stop accepting clients", within: .seconds(2)) { await server?.stopAccepting() }
        if let cluster = cluster.withLock({ $0 }) {
            await phase("leave the cluster", within: .seconds(5)) { cluster.stop() }
        }
        // The registry kills what is left when the grace runs out; a run that still does not end (a
        // process stuck in the kernel) does not hold the exit up for more than a few seconds more.
        await phase("let the runs finish", within: grace + .seconds(5)) { await registry.shutdown(grace: grace) }
        await phase("close the connections", within: .seconds(2)) { await server?.closeAll() }
        // What the runs' ends wrote (their history, the fires' records) is on disk before the exit.
        await phase("save the state", within: .seconds(5)) { await registry.closeStore() }
        log.notice("stopped")
        sink.flush()
        CurrentProcess.exit(0)
    }

    /// Runs one phase of the stop; after `limit` the stop goes on without it (logged).
    private func phase(_ name: String, within limit: Duration, _ body: @escaping @Sendable () async -> Void) async {
        let gate = PhaseGate()
        // Started here, isolated to this actor: the phase's work begins on the supervisor's queue.
        Task {
            await body()
            gate.open()
        }
        let log = self.log
        executor.queue.asyncAfter(deadline: .now() + .nanoseconds(Int(limit.nanoseconds))) {
            if gate.open() { log.warning("stopping: \(name) did not finish within \(DurationText.format(limit)); going on") }
        }
        await withCheckedContinuation { gate.wait($0) }
    }
}

/// Ends the wait of one stop phase once, by whichever comes first: the phase's end or its time limit.
private final class PhaseGate: Sendable {
    private let state = Locked<(open: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// Opens the gate; true for the call that opened it.
    @discardableResult
    func open() -> Bool {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Void, Never>?) in
            guard !state.open else { return (false, nil) }
            state.open = true
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume()
        return first
    }

    func wait(_ continuation: CheckedContinuation<Void, Never>) {
        let isOpen = state.withLock { state -> Bool in
            if !state.open { state.waiter = continuation }
            return state.open
        }
        if isOpen { continuation.resume() }
    }
}

/// The metrics file: written atomically from the registry's text (`Registry.metricsText`, read in slices),
/// one write at a time (a write still going when the timer fires again, with many jobs or a slow disk,
/// is not started twice); a failure to write is logged once, and its end.
private final class MetricsFile: Sendable {
    let path: String
    let log: Logger
    let queue = DispatchQueue(label: "timerd.metrics")
    private let state = Locked((writing: false, failing: false))

    init(path: String, log: Logger) {
        self.path = path
        self.log = log
    }

    func write(_ registry: Registry) {
        guard state.withLock({ state in defer { state.writing = true }; return !state.writing }) else { return }
        Task {
            let text = await registry.metricsText()
            queue.async { self.finish(text) }
        }
    }

    private func finish(_ text: String) {
        let failed: Errno?
        do {
            try FileSystem.writeAtomically(path, text)
            failed = nil
        } catch {
            failed = error
        }
        let wasFailing = state.withLock { state in
            defer { (state.writing, state.failing) = (false, failed != nil) }
            return state.failing
        }
        if let failed, !wasFailing { log.warning("metrics: cannot write \(path): \(failed)") }
        if failed == nil, wasFailing { log.notice("metrics: writing \(path) works again") }
    }
}
