import Dispatch
import TimerdCore
import TimerdEngine
import TimerdHost
import TimerdSystem
import TimerdProtocol
import TimerdStore
import TimerdConfig

/// The interpreter around the scheduling engine: it owns what the engine must not touch (Dispatch
/// timers, run handles, owner watches, the store, watchers, statistics) and carries out the engine's
/// effects. It makes no scheduling decision itself: every one is `engine.handle(input, at: clock.now())`.
///
/// An actor whose executor is the serial queue its `DispatchSourceTimer`s fire on: timer handlers enter it
/// synchronously with `assumeIsolated`, control sessions call it with `await`. Nothing here blocks: runs are
/// started by the `RunLauncher` on its own queue and report back with messages.
actor Registry {
    nonisolated let executor: QueueExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    nonisolated var queue: DispatchQueue { executor.queue }

    let log: Logger
    nonisolated let clock: any Clock
    let launcher: any RunLauncher
    /// Per-user limits and the output memory cap (`docs/security.md`).
    nonisolated let access: AccessControl
    /// Where durable state goes (nil: nothing is kept across restarts, as in unit tests).
    nonisolated let store: StateStore?
    /// Environment every run starts from (before `TIMERD_*`, the job's `env` and `meta`).
    let baseEnvironment: [KeyValue]

    /// Every scheduling decision.
    var engine: Engine

    /// Every armed job's deadline, and the Dispatch timer of each clock (`Registry+Timers.swift`).
    var timers = RegistryTimers()
    /// How the launcher keeps runs together, for `STATS`.
    nonisolated let runTracking: DaemonStats.RunTracking?
    /// What runs may be given here (cgroup controllers), for checking jobs' resource settings.
    nonisolated let resourceSupport: RunResourceSupport
    /// Runs in progress by "jobID/runID", so they can be stopped.
    var runHandles: [String: any RunHandle] = [:]
    /// The pidfd watch of each `owner=pid:N` job.
    var ownerWatches: [JobName: (jobID: UInt64, watch: IOWatcher.Registration)] = [:]
    /// `WHY` records waiting to be written (see `Registry+State.swift`).
    var pendingFireRecords: [FireRecordKey: (fire: StoredFire, keep: Int)] = [:]
    /// Jobs named by a request whose change is being written; a request naming one of them waits.
    var namesBeingChanged: Set<JobName> = []
    var nameWaiters: [CheckedContinuation<Void, Never>] = []
    /// Cancels answered whose jobs are still leaving the table (`finishCancel`), and who waits for them.
    var cancelsFinishing = 0
    var cancelWaiters: [CheckedContinuation<Void, Never>] = []
    /// While the store fails: the durable jobs as they were then, for a fresh `state.db` (see
    /// `Registry+Storage.swift`).
    nonisolated let storeSnapshot = Locked<[StoreChange]?>(nil)
    var fireRecordFlushScheduled = false

    /// Last-run outputs held for `show`, and the bookkeeping of `max_output_memory`.
    var outputs = HeldOutputs()

    /// When the timers next go off (`Registry+Timers.swift`), and the thread that writes `LIST`'s JSON
    /// and the metrics' text, which keeps clear of that (`clearance`).
    nonisolated let nextWake: NextWake
    nonisolated let background: BackgroundThread

    /// How the registry's background thread, which writes each slice's JSON (and the metrics' text),
    /// keeps clear of fires: no slice starts within a millisecond of the next one (a slice's JSON, its
    /// bytes through the socket and the client reading them take about that), and it waits until half a
    /// millisecond past it (the fire's turn and its command's start); it stands aside no longer than it
    /// has not, with at most 5 ms saved up (docs/performance.md, "LIST (round 14)").
    static func clearance(next: @escaping @Sendable () -> UInt64) -> BackgroundThread.Clearance {
        BackgroundThread.Clearance(before: .milliseconds(1), after: .microseconds(500), saved: .milliseconds(5), next: next)
    }

    // Measurements for STATS (see Registry+Stats.swift).
    /// Scheduled time to timer handler, per scheduled fire (ns).
    var lateness = SlidingWindow(span: Registry.statsWindow, capacity: 100_000)
    /// Start of a run to its process running (ns).
    var execLatency = SlidingWindow(span: Registry.statsWindow, capacity: 100_000)
    /// When each run was asked for, by "jobID/runID" (for `execLatency`).
    var runStarts: [String: MonoInstant] = [:]
    let startedMono: MonoInstant
    static let statsWindow = Duration.seconds(300)
    /// Every scheduled fire's lateness since start, for the metrics file.
    var latenessHistogram = Histogram(bounds: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5])
    /// `WATCH` subscribers by connection.
    var watchers: [Int: Watcher] = [:]
    /// Told about status changes (systemd's `STATUS=`); see `Registry+Status.swift`.
    var statusObserver: (@Sendable (String) -> Void)?
    var statusUpdatePending = false
    var watchdogTimer: (any DispatchSourceTimer)?
    var drainWaiters: [CheckedContinuation<Void, Never>] = []
    /// The clock-change watch (see `Registry+Calendar.swift`).
    var clockWatch: IOWatcher.Registration?

    // Cluster mode (see Registry+Cluster.swift and docs/cluster.md).
    /// The etcd session that claims shared fires; nil on a single host.
    var cluster: (any ClusterGate)?

    init(launcher: any RunLauncher, log: Logger, maxRunning: Int, baseEnvironment: [KeyValue], store: StateStore? = nil,
         access: AccessControl = AccessControl(AccessSettings()), clock: any Clock = HostClock(), seed: UInt64? = nil,
         runTracking: DaemonStats.RunTracking? = nil,
         resourceSupport: RunResourceSupport = RunResourceSupport(controllers: [], noCgroup: "not set up (a test registry)")) {
        self.executor = QueueExecutor(label: "timerd.registry", target: QueueExecutor.core)
        let nextWake = NextWake()
        self.nextWake = nextWake
        background = BackgroundThread(clearance: Self.clearance { nextWake.nanoseconds })
        self.runTracking = runTracking
        self.resourceSupport = resourceSupport
        self.access = access
        self.store = store
        self.launcher = launcher
        self.log = log
        self.clock = clock
        self.baseEnvironment = baseEnvironment
        startedMono = clock.monotonicNow
        engine = Engine(settings: EngineSettings(
            maxRunning: maxRunning, userMaxRunsPerMinute: access.settings.userMaxRunsPerMinute,
            userMaxJobs: access.settings.userMaxJobs, machineID: HostConfig.machineID, seed: seed ?? UInt64.random(in: .min ... .max),
            daemonUID: Client.daemonUID))
    }

    deinit {
        // The clocks' timers are descriptors (a registry of a test goes away; the daemon's never does).
        for clock in timers.clocks { clock?.close() }
    }

    /// Runs `body` on the registry's queue, isolated, without a task hop (for Dispatch handlers and launchers).
    nonisolated func enqueue(_ body: @escaping @Sendable (isolated Registry) -> Void) {
        queue.async { self.assumeIsolated { body($0) } }
    }

    // MARK: - The one way in

    /// Hands `input` to the engine at the clock's now, carries out its effects in order, and returns
    /// the engine's answer to a request.
    @discardableResult
    func deliver(_ input: Input) -> Result<Answer, TimerdError>? {
        let handled = handle(input)
        precondition(handled.writeAhead == nil, "a change to write ahead outside `request`")
        return handled.answer
    }

    private func handle(_ input: Input) -> (answer: Result<Answer, TimerdError>?, writeAhead: (change: UInt64, records: [Persist])?) {
        var answer: Result<Answer, TimerdError>?
        var writeAhead: (change: UInt64, records: [Persist])?
        for effect in engine.handle(input, at: clock.now()) {
            switch effect {
            case .reply(let result): answer = result
            case .writeAhead(let change, let records): writeAhead = (change, records)
            default: interpret(effect)
            }
        }
        return (answer, writeAhead)
    }

    /// A request that may change jobs: its answer once the change is in effect, which is once what it
    /// changes is on disk; or its error, and then nothing changed (`docs/state.md`). Requests naming
    /// the same job take effect one after the other, in the order they came.
    @discardableResult
    func request(_ input: Input, naming names: [JobName]) async throws(TimerdError) -> Answer {
        // The names of a request of many jobs are taken and given back a slice per step of the queue
        // (100,000 names in one step held a fire up tens of milliseconds).
        var released = 0
        defer { releaseNames(names[released...]) }
        if names.count <= Self.namesSlice {
            await takeNames(names)
        } else {
            await takeNamesInSlices(names)
        }
        // A change of many jobs (a CANCEL) is checked and then takes effect in slices, the engine
        // answering `partlyApplied` after each: the queue goes to whatever waits on it (timers due
        // meanwhile) before the next. Once it is on disk its jobs are gone for every request (none
        // fires, is listed, shown or counted), so it is answered then, and its jobs leave the table
        // behind the answer (`finishCancel`).
        var handled = handle(input)
        while true {
            if let answer = handled.answer {
                guard case .success(.partlyApplied(let change)) = answer else { return try answer.get() }
                if engine.isApplyingCancel(change) {
                    let rest = names[released...]
                    released = names.count
                    cancelsFinishing += 1
                    Task { await self.finishCancel(change, names: rest) }
                    return .done
                }
                await Task.yield()
                handled = handle(.continueChange(change))
                continue
            }
            guard let (change, records) = handled.writeAhead else { preconditionFailure("the engine did not answer a request") }
            switch await writeAhead([records])[0] {
            case .success: handled = handle(.changeSaved(change))
            case .failure(let error): handled = handle(.changeNotSaved(change, error))
            }
            guard handled.answer != nil else { preconditionFailure("the engine did not answer a saved change") }
        }
    }

    /// The rest of a cancel answered already: its jobs leave the table a slice per step
    /// (`Engine.cancelRemoveSlice`), and the names of those gone are given back after each (a request
    /// naming one waits till then, and then finds no such job, or adds it anew), the rest after the last.
    private func finishCancel(_ change: UInt64, names: ArraySlice<JobName>) async {
        var released = names.startIndex
        defer {
            releaseNames(names[released...])
            cancelsFinishing -= 1
            if cancelsFinishing == 0 {
                let waiters = cancelWaiters
                cancelWaiters = []
                for waiter in waiters { waiter.resume() }
            }
        }
        while let removed = engine.cancelRemovedCount(change) {
            let gone = min(names.startIndex + removed, names.endIndex)
            releaseNames(names[released..<gone])
            released = gone
            await Task.yield()
            // The steps follow each other on the registry's queue with no break in which its loop would
            // see a timer: jobs due meanwhile fire first (`deliverDue`).
            deliverDue()
            guard case .success(.partlyApplied) = handle(.continueChange(change)).answer else { return }
        }
    }

    /// Returns once the cancels answered already have removed all their jobs from the table (tests).
    func cancelsFinished() async {
        while cancelsFinishing > 0 { await withCheckedContinuation { cancelWaiters.append($0) } }
    }

    /// Names taken or given back per step of the queue: 2,000 were a step of 1.3 to 2.4 ms in a few of the
    /// 50 steps taking 100,000 names (load 6 on 2 cores), a fire due meanwhile waiting as long.
    static let namesSlice = 500

    /// Takes `names` at once, waiting until none is taken by another request.
    private func takeNames(_ names: [JobName]) async {
        while names.contains(where: namesBeingChanged.contains) {
            await withCheckedContinuation { nameWaiters.append($0) }
        }
        namesBeingChanged.formUnion(names)
    }

    /// Takes `names` a slice per step, in sorted order, waiting where one is taken by another request.
    /// Two requests taking names this way cannot wait for each other in a circle: each takes them in the
    /// same order, and a request taking its names at once takes none until all are free.
    private func takeNamesInSlices(_ names: [JobName]) async {
        // Sorted, each name once (a name twice would wait for itself), off the queue.
        let sorted = await JobList.sortedUnique(names)
        // Room for them at once: the set growing meanwhile rehashed tens of thousands of names in a step.
        namesBeingChanged.reserveCapacity(namesBeingChanged.count + sorted.count)
        var start = 0
        while start < sorted.count {
            let end = min(start + Self.namesSlice, sorted.count)
            // Each name taken as it is looked for (one hash of it, not two), up to one taken already.
            while start < end, namesBeingChanged.insert(sorted[start]).inserted { start += 1 }
            if start == end {
                await Task.yield()
            } else {
                await withCheckedContinuation { nameWaiters.append($0) }
            }
        }
    }

    /// Gives names back and wakes the requests waiting for names.
    private func releaseNames(_ names: ArraySlice<JobName>) {
        guard !names.isEmpty else { return }
        namesBeingChanged.subtract(names)
        if namesBeingChanged.isEmpty, namesBeingChanged.capacity > 4 * Self.namesSlice { namesBeingChanged = [] }
        let waiters = nameWaiters
        nameWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    /// Requests as `request` handles each, in order, with their writes in one transaction and one wait
    /// for it (a control connection's burst of changes: `Connection`). Each gets its own answer: one
    /// refused or not saved changes nothing of the others. The names of all of them are held from the
    /// start, so requests after these that name the same jobs take effect after them; requests of the
    /// batch that name a job an earlier one names are planned after the earlier one took effect. None may
    /// be a change in slices (a `CANCEL` of more than `Engine.cancelSlice` jobs): those go to `request`.
    func requests(_ batch: [NamedRequest]) async -> [Result<Answer, TimerdError>] {
        let names = Array(Set(batch.lazy.flatMap(\.names)))
        await takeNames(names)
        defer { releaseNames(ArraySlice(names)) }
        var answers: [Result<Answer, TimerdError>] = []
        answers.reserveCapacity(batch.count)
        var rest = batch[...]
        while !rest.isEmpty {
            // The longest run naming different jobs is planned, written and applied together.
            var named = Set<JobName>()
            let run = rest.prefix { request in
                defer { named.formUnion(request.names) }
                return !request.names.contains(where: named.contains)
            }
            rest = rest.dropFirst(run.count)
            answers += await plannedAndSaved(run)
        }
        return answers
    }

    /// Plans requests that name different jobs, writes what they change, then applies each change
    /// (or its failure).
    private func plannedAndSaved(_ run: ArraySlice<NamedRequest>) async -> [Result<Answer, TimerdError>] {
        var answers: [Result<Answer, TimerdError>?] = []
        answers.reserveCapacity(run.count)
        var saving: [(index: Int, change: UInt64)] = []
        var records: [[Persist]] = []
        for (position, request) in run.enumerated() {
            // Jobs due meanwhile fire between every few requests, not after the whole batch.
            if position % Self.dueCheckEvery == 0 { deliverDue() }
            let handled = handle(request.input)
            if let answer = handled.answer {
                if case .success(.partlyApplied) = answer { preconditionFailure("a change in slices in a batch") }
                answers.append(answer)
            } else if let (change, written) = handled.writeAhead {
                saving.append((answers.count, change))
                records.append(written)
                answers.append(nil)
            } else {
                preconditionFailure("the engine did not answer a request")
            }
        }
        guard !saving.isEmpty else { return answers.map { $0! } }
        let results = await writeAhead(records)
        for (position, ((index, change), result)) in zip(saving, results).enumerated() {
            if position % Self.dueCheckEvery == 0 { deliverDue() }
            let saved: Input = switch result {
            case .success: .changeSaved(change, moreToCome: position < saving.count - 1)
            case .failure(let error): .changeNotSaved(change, error)
            }
            guard let answer = handle(saved).answer else { preconditionFailure("the engine did not answer a saved change") }
            answers[index] = answer
        }
        return answers.map { $0! }
    }

    /// How many requests of a batch are planned or applied between two looks for jobs due meanwhile
    /// (about half a millisecond of work for `ADD`s).
    static let dueCheckEvery = 32

    // MARK: - Requests

    /// Adds a job and arms its timer. Throws `exists` if the name is taken, `bad-argument` if an `at` time
    /// has already passed or the owner process does not exist.
    func add(_ spec: JobSpec, origin: JobOrigin, connection: Int? = nil, owner: Client = .daemon) async throws(TimerdError) {
        let request = try Self.addJob(spec, origin: origin, connection: connection, owner: owner)
        // The owner process is watched from before the job exists, so its exit cannot be missed; the
        // request is checked before that watch is made (the engine checks every request again).
        if case .process = spec.owner {
            // A job of a cancel answered already keeps its name until its slice's turn (`finishCancel`).
            while namesBeingChanged.contains(spec.name) { await withCheckedContinuation { nameWaiters.append($0) } }
            try checkAdd(request)
        }
        let watch = try watchOwner(of: spec, origin: origin)
        do {
            try await self.request(.add(request), naming: [spec.name])
        } catch {
            if let watch { Self.release(watch) }
            throw error
        }
        if let watch, let job = engine.job(spec.name) { ownerWatches[spec.name] = (job.id, watch) }
    }

    /// The engine's request to add `spec`.
    nonisolated static func addJob(_ spec: JobSpec, origin: JobOrigin, connection: Int? = nil, owner: Client) throws(TimerdError) -> AddJob {
        AddJob(spec: spec, origin: origin, owner: owner.requester, civil: try HostConfig.civilSchedule(for: spec), connection: connection)
    }

    /// Throws what `add` would throw for `spec`, changing nothing (a shared job is checked here before it
    /// is written to etcd).
    func checkAdd(_ spec: JobSpec, origin: JobOrigin, owner: Client = .daemon) throws(TimerdError) {
        try checkAdd(Self.addJob(spec, origin: origin, owner: owner))
    }

    private func checkAdd(_ request: AddJob) throws(TimerdError) {
        do {
            try engine.checkAdd(request)
        } catch where error.code == .tooManyJobs {
            log.warning(Engine.refusedForTooManyJobs(request, limit: engine.settings.userMaxJobs))
            throw error
        }
    }

    /// A name for `EXEC` that no job in this daemon's life has had.
    func generateName() -> JobName { engine.generateName() }

    /// `count` names for `EXEC`s, as `generateName` gives them.
    func generateNames(_ count: Int) -> [JobName] { (0..<count).map { _ in engine.generateName() } }

    /// Cancels runtime jobs: every one or none. With `checkOnly`, only throws what cancelling would throw.
    func cancel(_ names: [JobName], by client: Client = .daemon, checkOnly: Bool = false) async throws(TimerdError) {
        try await request(.cancel(names, by: client.requester, checkOnly: checkOnly), naming: names)
    }

    /// Pauses jobs: their timers stop; fires that fall due while paused are skipped (reported at resume).
    func pause(_ names: [JobName], by client: Client = .daemon, checkOnly: Bool = false) async throws(TimerdError) {
        try await request(.pause(names, by: client.requester, checkOnly: checkOnly), naming: names)
    }

    /// Resumes paused jobs (a job that is not paused is left alone, so resuming is idempotent).
    func resume(_ names: [JobName], mode: ResumeMode, by client: Client = .daemon, checkOnly: Bool = false) async throws(TimerdError) {
        try await request(.resume(names, mode, by: client.requester, checkOnly: checkOnly), naming: names)
    }

    /// Fires a job once now, outside its schedule (`RUN`). Returns what happened to the fire.
    func runNow(_ name: JobName, by client: Client = .daemon, parameters: RunParameters = RunParameters(),
                force: Bool = false) async throws(TimerdError) -> String {
        let input = Input.runNow(name, by: client.requester, parameters: parameters, force: force)
        guard case .fire(let status) = try await request(input, naming: [name]) else { return "skipped" }
        return status
    }

    /// Switches the daemon's mode and starts the held fires of jobs that run in the new one.
    func switchMode(to mode: String) -> ModeInfo {
        let previous = engine.currentMode
        let released: [JobName]
        if case .success(.released(let names))? = deliver(.switchMode(mode)) { released = names } else { released = [] }
        if previous != mode { noteStatusChange() }
        return ModeInfo(mode: mode, previous: previous, held: heldFires(), released: released.map(\.rawValue))
    }

    func modeInfo() -> ModeInfo {
        ModeInfo(mode: engine.currentMode, held: heldFires())
    }

    private func heldFires() -> [ModeInfo.Held] {
        engine.liveJobs.map(\.name).sorted().compactMap { name in
            engine.job(name)!.heldSince.map { ModeInfo.Held(name: name.rawValue, since: RFC3339.format($0)) }
        }
    }

    // MARK: - Lookup

    /// Whether `client` may see `job`'s action, environment, meta and output.
    func maySeeDetails(_ job: EngineJob, _ client: Client) -> Bool { client.owns(job.ownerUID) }

    /// Jobs carrying `tag`, sorted by name.
    func names(withTag tag: String) -> [JobName] { engine.names(withTag: tag) }

    /// Whether any job carries `tag` (without listing them).
    func hasJobs(withTag tag: String) -> Bool { !engine.jobs.names(withTag: tag).isEmpty }

    /// Whether a control connection owns `owner=connection` jobs (such a connection is never idle-closed).
    func ownsJobs(connection: Int) -> Bool {
        engine.jobs.owned(byConnection: connection).contains { engine.job($0).map { !engine.isCancelPending($0) } ?? false }
    }

    /// A control connection closed: cancel the jobs it owned (`owner=connection`), stop its watch.
    func connectionClosed(_ connection: Int) {
        removeWatcher(connection)
        deliver(.connectionClosed(connection))
    }

    /// Counts for the startup line and `STATUS=`.
    func counts() -> (jobs: Int, running: Int) {
        (engine.jobs.count - engine.cancelPendingCount, engine.runningTotal)
    }
}

extension Client {
    /// The client as the engine knows who asks.
    var requester: Requester { Requester(uid: uid, isAdmin: isAdmin, label: label) }
}

/// A fire record's identity: its job and its number.
struct FireRecordKey: Hashable {
    var job: String
    var sequence: UInt64
}

/// A request for `Registry.requests`: the engine's input and the jobs it changes.
struct NamedRequest: Sendable {
    var input: Input
    var names: [JobName]

    init(_ input: Input, naming names: [JobName]) {
        self.input = input
        self.names = names
    }
}
