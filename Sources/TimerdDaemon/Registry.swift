import Dispatch
import TimerdCore
import TimerdSystem
import TimerdProtocol
import TimerdStore
import TimerdConfig

/// The one owner of every job, its timer and its state.
///
/// An actor whose executor is the serial queue its `DispatchSourceTimer`s fire on: timer handlers enter it
/// synchronously with `assumeIsolated`, control sessions call it with `await`. Nothing here blocks: runs are
/// started by the `RunLauncher` on its own queue and report back with messages.
actor Registry {
    nonisolated let executor: QueueExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    nonisolated var queue: DispatchQueue { executor.queue }

    let log: Logger
    let launcher: any RunLauncher
    /// Per-user limits and the output memory cap (`docs/security.md`).
    nonisolated let access: AccessControl
    /// Runs per minute of each non-root user's jobs (`user_max_runs_per_minute`).
    var runBuckets: [UInt32: TokenBucket] = [:]
    /// Last-run outputs held for `show`, oldest first, and their total size (`max_output_memory`).
    var heldOutputs: [(sequence: UInt64, name: JobName)] = []
    var heldOutputStart = 0
    var nextOutputSequence: UInt64 = 0
    var outputsDropped = 0
    /// Where durable state goes (nil: nothing is kept across restarts, as in unit tests).
    nonisolated let store: StateStore?
    /// Environment every run starts from (before `TIMERD_*`, the job's `env` and `meta`).
    let baseEnvironment: [KeyValue]

    var jobs = JobTable()
    var maxRunning: Int
    var runningTotal = 0
    /// Fires waiting for a run slot, oldest first.
    var waiting: [(name: JobName, jobID: UInt64, fire: PendingFire)] = []
    /// Runs of jobs that were cancelled or removed while running (still counted in `runningTotal`), by
    /// "jobID/runID", so shutdown can still stop them.
    var orphanHandles: [String: any RunHandle] = [:]
    var shuttingDown = false
    /// The daemon's mode (like a run loop's): jobs not in it hold their fires. Survives reloads.
    var currentMode = Mode.defaultName

    // Cluster mode (see Registry+Cluster.swift and docs/cluster.md).
    /// The etcd session that claims shared fires; nil on a single host.
    var cluster: (any ClusterGate)?
    var clusterRole = ClusterRole.connecting
    /// The node that leads (runs the shared jobs), as last seen.
    var clusterLeader: String?

    // Measurements for STATS (see Registry+Stats.swift).
    /// Scheduled time to timer handler, per scheduled fire (ns).
    var lateness = SlidingWindow(span: Registry.statsWindow, capacity: 100_000)
    /// Start of a run to its process running (ns).
    var execLatency = SlidingWindow(span: Registry.statsWindow, capacity: 100_000)
    var runsByResult: [RunOutcome.Result: Int] = [:]
    var skippedTotal = 0
    let startedMono = SystemClock.monoNow()
    static let statsWindow = Duration.seconds(300)
    /// Every scheduled fire's lateness since start, for the metrics file.
    var latenessHistogram = Histogram(bounds: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5])
    /// `WATCH` subscribers by connection.
    var watchers: [Int: Watcher] = [:]
    /// `owner=connection` jobs by connection, so a closing connection costs nothing per other job.
    var jobsOwnedByConnection: [Int: Set<JobName>] = [:]
    /// Told about status changes (systemd's `STATUS=`); see `Registry+Status.swift`.
    var statusObserver: (@Sendable (String) -> Void)?
    var statusUpdatePending = false
    var watchdogTimer: (any DispatchSourceTimer)?
    var drainWaiters: [CheckedContinuation<Void, Never>] = []
    /// False until the config read at start-up is applied: `@reboot` jobs fire only then.
    var initialConfigApplied = false
    /// The clock-change watch (see `Registry+Calendar.swift`).
    var clockWatch: IOWatcher.Registration?

    /// Runtime jobs that finished their schedule, oldest first (pruned beyond `finishedRuntimeJobsKept`).
    var finishedRuntimeJobs: [(name: JobName, id: UInt64)] = []
    var nextJobID: UInt64 = 1
    private var nextExecNumber: UInt64 = 1
    /// Every name a job has had in this daemon's life, so a generated name is never handed out twice.
    var namesEverUsed: Set<String> = []
    /// Finished runtime jobs kept for `show`; beyond this the oldest finished ones are forgotten.
    static let finishedRuntimeJobsKept = 1_000

    init(launcher: any RunLauncher, log: Logger, maxRunning: Int, baseEnvironment: [KeyValue], store: StateStore? = nil,
         access: AccessControl = AccessControl(AccessSettings())) {
        self.executor = QueueExecutor(label: "timerd.registry")
        self.access = access
        self.store = store
        self.launcher = launcher
        self.log = log
        self.maxRunning = maxRunning
        self.baseEnvironment = baseEnvironment
    }

    /// Runs `body` on the registry's queue, isolated, without a task hop (for Dispatch handlers and launchers).
    nonisolated func enqueue(_ body: @escaping @Sendable (isolated Registry) -> Void) {
        queue.async { self.assumeIsolated { body($0) } }
    }

    // MARK: - Adding and removing

    /// Adds a job and arms its timer. Throws `exists` if the name is taken, `bad-argument` if an `at` time
    /// has already passed.
    func add(_ spec: JobSpec, origin: JobOrigin, connection: Int? = nil, owner: Client = .daemon) throws(TimerdError) {
        let civil = try checkAdd(spec, origin: origin, owner: owner)
        var job = Job(id: nextJobID, spec: spec, origin: origin, ownerUID: owner.uid)
        job.shared = sharesJob(spec, origin: origin)
        job.civil = civil
        try bindOwner(&job, connection: connection)
        nextJobID += 1
        namesEverUsed.insert(spec.name.rawValue)
        job.addedWall = SystemClock.wallNow()
        startSchedule(&job, from: SystemClock.monoNow())
        if let grid = job.grid { job.anchorWall = wallTime(ofMono: grid.first) }
        jobs[spec.name] = job
        persistJob(spec.name)
        log.info(job: spec.name.rawValue, "added (\(origin.label)): \(spec.schedule.summary): \(spec.action.summary)")
        if case .webhook(let hook) = spec.action, hook.insecure {
            log.warning(job: spec.name.rawValue, "insecure=yes: the server's TLS certificate is not verified")
        }
        emit("added", job: spec.name)
        if case .at(let time) = spec.schedule, time < SystemClock.wallNow() {
            // Only config jobs get here: their time passed before this daemon loaded them. At start-up,
            // `restore` applies the job's misfire policy; at a reload the time is simply past.
            jobs[spec.name]!.state = .finished
            if initialConfigApplied {
                noteSkip(spec.name, count: 1, reason: "its time \(RFC3339.format(time)) passed before timerd loaded it")
            }
            return
        }
        if job.civil != nil, job.nextWall == nil {
            jobs[spec.name]!.state = .finished
            log.warning(job: spec.name.rawValue, "\(spec.schedule.summary) has no fire time after now; the job will never fire")
            return
        }
        arm(spec.name)
    }

    /// Throws what `add` would throw for `spec`, changing nothing (a shared job is checked here before it
    /// is written to etcd). Returns the job's calendar schedule, if it has one.
    @discardableResult
    func checkAdd(_ spec: JobSpec, origin: JobOrigin, owner: Client = .daemon) throws(TimerdError) -> CivilSchedule? {
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        if let existing = jobs[spec.name] {
            let whence = existing.origin == .runtime ? "added at run time" : "declared in the config"
            throw TimerdError(.exists, "a job named \(spec.name) already exists (\(whence)); cancel it first or pick another name")
        }
        let maxJobs = access.settings.userMaxJobs
        if !owner.isAdmin, jobs.countByOwner[owner.uid, default: 0] >= maxJobs {
            log.warning("control: \(owner.label): refused to add \(spec.name): user_max_jobs=\(maxJobs) reached")
            throw TimerdError(.tooManyJobs, "uid \(owner.uid) already has \(maxJobs) jobs (user_max_jobs); cancel some first")
        }
        if case .at(let time) = spec.schedule, origin == .runtime, time < SystemClock.wallNow() {
            throw TimerdError(.badArgument, "at: \(RFC3339.format(time)) is in the past", key: "at")
        }
        if case .cron(let expression) = spec.schedule, expression.isReboot, origin == .runtime {
            throw TimerdError(.badArgument, "@reboot jobs run once when timerd starts: declare them in the config file", key: "cron")
        }
        let civil = try Self.civilSchedule(for: spec)
        if let civil, origin == .runtime, civil.next(after: SystemClock.wallNow()) == nil {
            throw TimerdError(.badArgument, "\(spec.schedule.summary) has no fire time after now", key: spec.schedule.key)
        }
        return civil
    }

    /// A name for `EXEC` that no job in this daemon's life has had.
    func generateName() -> JobName {
        while true {
            let candidate = "exec-\(nextExecNumber)"
            nextExecNumber += 1
            if !namesEverUsed.contains(candidate), let name = try? JobName(candidate) { return name }
        }
    }

    /// Cancels runtime jobs. All names are checked first: either every one is cancelled or none is.
    /// With `checkOnly`, only throws what cancelling would throw.
    func cancel(_ names: [JobName], by client: Client = .daemon, checkOnly: Bool = false) throws(TimerdError) {
        for name in names {
            let job = try lookup(name, changedBy: client)
            if case .config(let file, let line) = job.origin {
                throw TimerdError(
                    .declaredInConfig,
                    "\(name) is declared in \(file):\(line); remove it there and reload (it can be paused)")
            }
        }
        if checkOnly { return }
        for name in names { remove(name, reason: "cancelled") }
    }

    /// Removes a job, stops its timer and drops its pending fires. Running runs finish on their own.
    func remove(_ name: JobName, reason: String) {
        guard var job = jobs.removeValue(forKey: name) else { return }
        // Its stored spec and history go with it (a config job removed from the config too).
        if job.spec.owner == nil { persist([.deleteJob(name.rawValue)]) }
        if let connection = job.ownerConnection { jobsOwnedByConnection[connection]?.remove(name) }
        disarm(&job)
        releaseOwner(&job)
        let dropped = (job.queued == nil ? 0 : 1) + job.waitingForSlot
        if job.waitingForSlot > 0 { waiting.removeAll { $0.jobID == job.id } }
        for run in job.active { orphanHandles["\(job.id)/\(run.id)"] = run.handle }
        var message = reason
        if !job.active.isEmpty { message += "; \(job.active.count) run(s) still going will finish on their own" }
        if dropped > 0 { message += "; \(dropped) pending fire(s) dropped" }
        log.info(job: name.rawValue, message)
        emit("cancelled", job: name, reason: message)
    }

    /// Pauses jobs: their timers stop; fires that fall due while paused are skipped (reported at resume).
    func pause(_ names: [JobName], by client: Client = .daemon, checkOnly: Bool = false) throws(TimerdError) {
        for name in names {
            if try lookup(name, changedBy: client).state == .finished { throw finishedError(name) }
        }
        if checkOnly { return }
        for name in names where jobs[name]?.state == .scheduled {
            jobs[name]!.state = .paused
            disarm(&jobs[name]!)
            if jobs[name]!.heldFire != nil {
                jobs[name]!.heldFire = nil
                jobs[name]!.heldSince = nil
                noteSkip(name, count: 1, reason: "paused while its fire was held (mode \(currentMode))")
            }
            log.info(job: name.rawValue, "paused")
            persistJob(name)
            emit("paused", job: name)
        }
    }

    enum ResumeMode: Sendable {
        case onSchedule
        case now
        case after(Duration)

        var isOnSchedule: Bool {
            if case .onSchedule = self { return true }
            return false
        }
    }

    /// Resumes paused jobs (a job that is not paused is left alone, so resuming is idempotent).
    func resume(_ names: [JobName], mode: ResumeMode, by client: Client = .daemon, checkOnly: Bool = false) throws(TimerdError) {
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        for name in names {
            let job = try lookup(name, changedBy: client)
            if job.state == .finished { throw finishedError(name) }
            if job.shared, !mode.isOnSchedule {
                throw TimerdError(.badArgument, "\(name) is a cluster job: RESUME it on its schedule (then RUN it if it must run now)")
            }
        }
        if checkOnly { return }
        let now = SystemClock.monoNow()
        for name in names {
            guard var job = jobs[name] else { continue }
            let wasPaused = job.state == .paused
            if !wasPaused, case .onSchedule = mode { continue }
            emit("resumed", job: name)
            job.state = .scheduled
            defer { persistJob(name) }
            switch mode {
            case .onSchedule:
                let missed = resumeOnSchedule(&job, now: now)
                jobs[name] = job
                log.info(job: name.rawValue, missed > 0 ? "resumed; \(missed) fire(s) fell due while paused and were skipped" : "resumed")
                if missed > 0 { noteSkip(name, count: missed, reason: "paused") }
                arm(name)
            case .now:
                // This fire is the schedule's next one: a one-shot is done after it, a repeating job
                // continues on its grid after now.
                if let grid = job.grid {
                    job.nextIndex = grid.index(after: now)
                    job.nextMono = grid.instant(job.nextIndex) &+ UInt64(jitterNanoseconds(job))
                } else if job.civil != nil {
                    job.nextMono = nil
                    job.civilBase = SystemClock.wallNow()
                    scheduleNextCivilFire(&job)
                }
                jobs[name] = job
                log.info(job: name.rawValue, wasPaused ? "resumed; firing now" : "firing now (RESUME now)")
                fire(name, scheduledMono: now, kind: .scheduled)
                continueSchedule(name)
            case .after(let delay):
                let first = now &+ UInt64(delay.nanoseconds)
                switch job.spec.schedule {
                case .every(let interval, _):
                    job.grid = FireGrid(first: first, interval: interval)
                    job.nextIndex = 0
                    job.nextMono = first
                    // The new phase is the one a restart keeps.
                    job.anchorWall = wallTime(ofMono: first)
                case .after, .at, .cron, .calendar:
                    // Calendar jobs fire once after the delay, then go on with their calendar.
                    job.nextMono = first
                    job.nextWall = nil
                    job.nextNominal = nil
                }
                jobs[name] = job
                log.info(job: name.rawValue, "resumed; next fire in \(DurationText.format(delay))")
                arm(name)
            }
        }
    }

    /// Fires a job once now, outside its schedule (`RUN`). Returns what happened to the fire.
    func runNow(_ name: JobName, by client: Client = .daemon) throws(TimerdError) -> String {
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        let job = try lookup(name, changedBy: client)
        if !job.active.isEmpty {
            switch job.spec.overlap {
            case .skip:
                throw TimerdError(.busy, "\(name) is still running (run \(job.active[0].id)) and overlap=skip")
            case .queue where job.queued != nil, .replace where job.queued != nil:
                throw TimerdError(.busy, "\(name) is still running and a fire is already queued")
            default: break
            }
        }
        if !takeRunToken(job) {
            let limit = access.settings.userMaxRunsPerMinute
            throw TimerdError(.rateLimited, "uid \(job.ownerUID)'s jobs started \(limit) runs in the last minute (user_max_runs_per_minute); try again later")
        }
        log.info(job: name.rawValue, "run requested (RUN)")
        defer { persistFire(name) }
        return fire(name, scheduledMono: SystemClock.monoNow(), kind: .manual)
    }

    // MARK: - Lookup

    func lookup(_ name: JobName) throws(TimerdError) -> Job {
        guard let job = jobs[name] else { throw TimerdError(.noSuchJob, "no job named \(name)") }
        return job
    }

    /// The job, if `client` may change it: root and timerd's own user may change any job, other users only
    /// their own. Throws `no-such-job` or `permission-denied`.
    func lookup(_ name: JobName, changedBy client: Client) throws(TimerdError) -> Job {
        let job = try lookup(name)
        guard client.owns(job.ownerUID) else {
            log.warning("control: \(client.label): refused to change \(name), which belongs to uid \(job.ownerUID)")
            throw TimerdError(.permissionDenied, "\(name) belongs to uid \(job.ownerUID); only its owner and root may change it")
        }
        return job
    }

    /// Whether `client` may see `job`'s action, environment, meta and output.
    func maySeeDetails(_ job: Job, _ client: Client) -> Bool { client.owns(job.ownerUID) }

    /// Takes one of the owner's runs for this minute (`user_max_runs_per_minute`); root's and timerd's own
    /// jobs are not limited. False when the owner is over the limit.
    func takeRunToken(_ job: Job) -> Bool {
        guard !Client.isAdmin(uid: job.ownerUID) else { return true }
        let limit = access.settings.userMaxRunsPerMinute
        let now = MonoInstant(nanosecondsSinceBoot: SystemClock.monoNow())
        var bucket = runBuckets[job.ownerUID] ?? TokenBucket(capacity: limit, perSecond: Double(limit) / 60, now: now)
        if bucket.capacity != Double(limit) { bucket = TokenBucket(capacity: limit, perSecond: Double(limit) / 60, now: now) }
        let taken = bucket.take(now: now)
        runBuckets[job.ownerUID] = bucket
        return taken
    }

    private func finishedError(_ name: JobName) -> TimerdError {
        TimerdError(.finished, "\(name) has finished its schedule; RUN it by hand, or cancel it and add it again")
    }

    /// Forgets the oldest finished runtime jobs beyond `finishedRuntimeJobsKept` (config jobs stay).
    func pruneFinishedRuntimeJobs() {
        while finishedRuntimeJobs.count > Self.finishedRuntimeJobsKept {
            let (name, id) = finishedRuntimeJobs.removeFirst()
            // Only if it is still that same finished job (not cancelled, re-added, or re-run meanwhile).
            if let job = jobs[name], job.id == id, job.state == .finished, job.active.isEmpty, job.queued == nil,
               job.waitingForSlot == 0 {
                jobs[name] = nil
                if isDurable(job) { persist([.deleteJob(name.rawValue)]) }
                log.debug(job: name.rawValue, "forgotten: more than \(Self.finishedRuntimeJobsKept) finished runtime jobs are kept")
            }
        }
    }
}
