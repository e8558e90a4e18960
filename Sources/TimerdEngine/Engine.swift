import TimerdCore

/// A job to add, as a request or a config file declares it.
package struct AddJob: Sendable {
    package var spec: JobSpec
    package var origin: JobOrigin
    package var owner: Requester
    /// The cron or calendar schedule resolved in its zone (reading zones is I/O: the caller does it).
    package var civil: CivilSchedule?
    /// The control connection that adds it (`owner=connection` binds to it).
    package var connection: Int?

    package init(spec: JobSpec, origin: JobOrigin, owner: Requester, civil: CivilSchedule?, connection: Int? = nil) {
        self.spec = spec
        self.origin = origin
        self.owner = owner
        self.civil = civil
        self.connection = connection
    }
}

/// A config job as a (re)load declares it.
package struct DeclaredJob: Sendable {
    package var spec: JobSpec
    package var file: String
    package var line: Int
    package var civil: CivilSchedule?
    /// The highest run number the job's name has in the state database: a job new to the engine (at
    /// start-up, or added back by a reload) numbers its runs on from it, so `TIMERD_RUN` names one run.
    package var runs: Int

    package init(spec: JobSpec, file: String, line: Int, civil: CivilSchedule?, runs: Int = 0) {
        self.spec = spec
        self.file = file
        self.line = line
        self.civil = civil
        self.runs = runs
    }
}

/// A runtime job read back from `state.db` at start-up.
package struct RestoredJob: Sendable {
    package var stored: StoredJobState
    package var spec: JobSpec
    package var civil: CivilSchedule?

    package init(stored: StoredJobState, spec: JobSpec, civil: CivilSchedule?) {
        self.stored = stored
        self.spec = spec
        self.civil = civil
    }
}

/// What `state.db` holds for the engine at start-up.
package struct RestoredState: Sendable {
    /// Runtime jobs, in the order they were added.
    package var jobs: [RestoredJob] = []
    /// Config jobs' last scheduled fires.
    package var configFires: [JobName: WallTime] = [:]
    /// Every job's newest run in the history, for `show`.
    package var lastRuns: [JobName: FinishedRun] = [:]
    /// Every job's newest `WHY` record number, so new records follow the old ones.
    package var fireSequences: [JobName: UInt64] = [:]

    package init() {}
}

/// A shared job as etcd has it (cluster mode).
package struct SharedJob: Sendable {
    package var spec: JobSpec
    package var civil: CivilSchedule?
    package var ownerUID: UInt32
    package var addedAt: WallTime
    package var paused: Bool
    /// etcd's revision of the record.
    package var revision: Int64
    /// The node that added it.
    package var node: String

    package init(spec: JobSpec, civil: CivilSchedule?, ownerUID: UInt32, addedAt: WallTime, paused: Bool, revision: Int64, node: String) {
        self.spec = spec
        self.civil = civil
        self.ownerUID = ownerUID
        self.addedAt = addedAt
        self.paused = paused
        self.revision = revision
        self.node = node
    }
}

/// Where this node stands in the cluster: connecting to etcd, a live member (its lease renewed, so it
/// runs its share of the shared jobs), or cut off from etcd (it runs none).
package enum ClusterRole: String, Sendable {
    case connecting, member, unavailable
}

/// Everything that can happen to the engine.
package enum Input: Sendable {
    // Requests. Each is answered by exactly one `Effect.reply`.
    case add(AddJob)
    /// With `checkOnly`, only says what the change would answer (before a cluster write).
    case cancel([JobName], by: Requester, checkOnly: Bool)
    case pause([JobName], by: Requester, checkOnly: Bool)
    case resume([JobName], ResumeMode, by: Requester, checkOnly: Bool)
    /// `RUN`: fire once now, outside the schedule.
    /// A run by hand (`RUN`), with what it adds to the job, and `force`: even where `overlap` would refuse it.
    case runNow(JobName, by: Requester, parameters: RunParameters = RunParameters(), force: Bool = false)
    case switchMode(String)
    /// The config was read (at start-up, or again): its jobs and `max_running`.
    case reload([DeclaredJob], maxRunning: Int, pools: [String: Int] = [:])
    /// Start-up, after the config: the runtime jobs and config jobs' last fires from `state.db`.
    case restore(RestoredState)
    /// The records of a request's change (`Effect.writeAhead`) are durable: the change takes effect.
    /// `moreToCome`: more changes of the same burst of requests follow at once (the jobs it adds are
    /// logged together when it ends, `Engine.logAdded`).
    case changeSaved(UInt64, moreToCome: Bool = false)
    /// They could not be written: the change is dropped and the request answered with `error`.
    case changeNotSaved(UInt64, TimerdError)
    /// The next slice of a change answered `Answer.partlyApplied(change)` (a `CANCEL` of many jobs).
    case continueChange(UInt64)

    // Timers, runs, the host.
    /// A job's armed deadline was reached.
    case deadlineReached(JobName, jobID: UInt64)
    case runStarted(JobName, jobID: UInt64, run: Int, pid: Int32?)
    case runFinished(JobName, jobID: UInt64, run: Int, RunOutcome)
    /// The wall clock was set (an NTP step, `date -s`, a resume from suspend, a test clock).
    case wallClockSet(reason: String)
    /// Time zone rules were read again: the jobs whose resolved schedule changed.
    case zonesChanged([JobName: CivilSchedule])
    /// An `owner=pid:N` job's process exited.
    case ownerGone(JobName, jobID: UInt64, reason: String)
    /// A control connection closed: its `owner=connection` jobs go.
    case connectionClosed(Int)
    /// Stop: no more fires; `Effect.drained` once no run is left.
    case shutdown
    /// SIGKILL every run (the stop's grace ran out, or a second SIGTERM).
    case killAll(reason: String)

    // Cluster mode.
    /// This node's role or the live members changed: shared jobs move to their owners.
    case clusterView(ClusterView)
    case claimDecided(JobName, jobID: UInt64, token: UInt64, won: Bool, reason: String)
    /// A shared job was added or changed in etcd (a watch event, the initial read, or this node's own
    /// write).
    case sharedJob(SharedJob)
    /// The whole shared job set as etcd has it: jobs it no longer has are removed.
    case sharedJobsSynced([SharedJob])
    /// Shared jobs were cancelled in etcd at `revision`.
    case sharedJobsRemoved([JobName], revision: Int64)
    /// This node wrote a change of these shared jobs at `revision` (its own watch event is then old).
    case sharedRevision([JobName], revision: Int64)
    /// Another node finished a run of a shared job.
    /// `final`: its fire's last attempt (no retry follows), which fires the jobs that follow it.
    case remoteRun(FinishedRun, final: Bool)
}

/// The answer to a request input.
package enum Answer: Sendable, Equatable {
    case done
    /// `RUN`: what became of the fire (`started`, `queued`, `waiting`, `held`, `claiming`, `skipped`).
    case fire(String)
    /// `MODE NAME`: the jobs whose held fires were released.
    case released([JobName])
    /// A durable change took effect in part: `Input.continueChange(change)` applies the next slice (the
    /// request is answered once the last one has taken effect).
    case partlyApplied(UInt64)
}

/// The engine's fixed settings.
package struct EngineSettings: Sendable {
    package var maxRunning: Int
    /// Runs per minute of each non-root user's jobs (`user_max_runs_per_minute`).
    package var userMaxRunsPerMinute: Int
    /// Jobs per non-root user (`user_max_jobs`).
    package var userMaxJobs: Int
    /// The seed of fixed jitter (`/etc/machine-id`).
    package var machineID: String
    /// Seeds the random jitter, so a run of the engine can be repeated exactly.
    package var seed: UInt64
    /// This node's name in cluster mode (nil on a single host).
    package var clusterNode: String?
    /// `WHY` records kept per job.
    package var fireRecordsKept: Int
    /// timerd's own uid: its jobs, like root's, are not limited per user.
    package var daemonUID: UInt32
    /// Whether to emit `Effect.log` (the daemon logs; `simulate` prints decisions only).
    package var logs = true
    /// `[pool "NAME"]`: the most runs at once of the jobs in each pool (`pool=NAME`).
    package var pools: [String: Int] = [:]

    package init(maxRunning: Int = 64, userMaxRunsPerMinute: Int = 600, userMaxJobs: Int = 1_000, machineID: String = "",
                 seed: UInt64 = 0, clusterNode: String? = nil, fireRecordsKept: Int = Limits.fireRecordsKept,
                 daemonUID: UInt32 = 0) {
        self.daemonUID = daemonUID
        self.maxRunning = maxRunning
        self.userMaxRunsPerMinute = userMaxRunsPerMinute
        self.userMaxJobs = userMaxJobs
        self.machineID = machineID
        self.seed = seed
        self.clusterNode = clusterNode
        self.fireRecordsKept = fireRecordsKept
    }

    /// Root and timerd's own user: they may change every job, and their jobs are not limited.
    package func isAdmin(_ uid: UInt32) -> Bool { uid == 0 || uid == daemonUID }
}

/// The scheduling engine: every decision about when jobs fire and what becomes of each fire, with no
/// I/O. It never reads a clock (`now` is an argument), never touches a timer, a process, a file or a
/// socket: it takes `Input`s and returns `Effect`s, which the daemon (or `timerctl simulate`, or a test)
/// carries out. The same inputs at the same instants give the same effects.
package struct Engine: Sendable {
    package var settings: EngineSettings
    package internal(set) var jobs = JobTable()
    /// Fires waiting for a run slot, oldest first.
    var waiting: [(name: JobName, jobID: UInt64, fire: PendingFire)] = []
    /// Runs going in each pool, and the pool of each run going in one (by job id and run number).
    var runningByPool: [String: Int] = [:]
    var runPools: [RunKey: String] = [:]
    package internal(set) var runningTotal = 0
    /// Runs of jobs removed while running (still counted in `runningTotal`).
    var orphanRuns: [(job: JobName, jobID: UInt64, run: Int)] = []
    package internal(set) var shuttingDown = false
    /// The daemon's mode: jobs not in it hold their fires.
    package internal(set) var currentMode = Mode.defaultName
    /// False until the config read at start-up is applied: `@reboot` jobs fire only then.
    package internal(set) var initialConfigApplied = false
    package internal(set) var skippedTotal = 0
    package internal(set) var runsByResult = ResultCounts()
    var runBuckets: [UInt32: TokenBucket] = [:]
    var nextJobID: UInt64 = 1
    var nextExecNumber: UInt64 = 1
    /// Every name of the generated kind (`exec-N`) a job has had in this engine's life, so a generated
    /// name is never handed out twice. Only those: a set of every name cost 42 bytes per job at 100,000.
    var generatedNamesEverUsed: Set<String> = []
    /// Runtime jobs that finished their schedule, oldest first (pruned beyond `finishedRuntimeJobsKept`).
    var finishedRuntimeJobs: [(name: JobName, id: UInt64)] = []
    var random: SplitMix64
    package internal(set) var clusterRole = ClusterRole.connecting
    /// The live members of the cluster, as this node last heard from etcd.
    package internal(set) var clusterMembers: [ClusterMember] = []
    var nextClaimToken: UInt64 = 1
    var claims: [UInt64: PendingFire] = [:]
    /// Requests' changes whose records are being written (`Effect.writeAhead`), by change number.
    var awaitingSave: [UInt64: PlannedChange] = [:]
    /// The jobs added by requests among them: their names are taken and they count for their owners.
    var addsBeingSaved = AddsBeingSaved()
    var nextChangeNumber: UInt64 = 1
    /// While a saved change is applied: its records, already durable, so not written again. A slice:
    /// the change takes effect in the order its records were made, so the one `persist` looks for is
    /// nearly always the first, and dropping it costs nothing (a `CANCEL` of 100,000 jobs removed each
    /// from the front of an array: minutes).
    var savedAhead: ArraySlice<Persist> = []
    /// `CANCEL`s of many jobs being checked, a slice per input (`Input.continueChange`).
    var cancelsChecking: [UInt64: CancelCheck] = [:]
    /// `CANCEL`s of many jobs being written: their jobs, a slice each, and their ids.
    var cancelsSaving: [UInt64: CancelCheck] = [:]
    /// `CANCEL`s of many jobs on disk and taking effect, a slice per input.
    var cancelsApplying: [UInt64: CancelInProgress] = [:]
    /// Their jobs still in the table, by owner: gone already for `user_max_jobs` (and every count).
    package internal(set) var cancelPendingByOwner: [UInt32: Int] = [:]

    /// Finished runtime jobs kept for `show`; beyond this the oldest finished ones are forgotten.
    package static let finishedRuntimeJobsKept = 1_000

    /// Jobs added and not logged yet: the burst of requests that adds them is logged when it ends
    /// (`Input.changeSaved`'s `moreToCome`), whatever else is handled meanwhile (jobs due between them).
    var addedUnlogged: [EngineJob] = []
    /// The last saved change said more of its burst comes.
    var burstGoesOn = false
    /// Beyond this many jobs added at once, one line names the first of them and counts the rest.
    static let addedLinesMax = 10

    /// The effects of the input being handled.
    var out: [Effect] = []
    /// The instant of the input being handled.
    var now = Instant(mono: .zero, wall: WallTime(nanosecondsSinceEpoch: 0))

    package init(settings: EngineSettings) {
        self.settings = settings
        random = SplitMix64(seed: settings.seed)
    }

    /// Handles one input at `now` and returns what must be done, in order.
    package mutating func handle(_ input: Input, at now: Instant) -> [Effect] {
        self.now = now
        out = []
        out.reserveCapacity(8)
        var answer: Result<Answer, TimerdError>?
        switch input {
        case .add, .cancel, .pause, .resume, .runNow:
            answer = request(input)
        case .switchMode(let mode):
            answer = .success(.released(switchMode(to: mode)))
        case .reload(let declared, let maxRunning, let pools):
            answer = Result { () throws(TimerdError) in try applyConfig(declared, maxRunning: maxRunning, pools: pools); return .done }
        case .changeSaved(let number, _):
            if let change = awaitingSave.removeValue(forKey: number) {
                addsBeingSaved.remove(change)
                if let saving = cancelsSaving.removeValue(forKey: number) {
                    answer = applyCancel(saving, change: number)
                } else {
                    answer = apply(change)
                }
            }
        case .changeNotSaved(let number, let error):
            if let change = awaitingSave.removeValue(forKey: number) {
                addsBeingSaved.remove(change)
                cancelsSaving[number] = nil
                answer = .failure(error)
            }
        case .continueChange(let number):
            answer = continueCancel(number)
        case .restore(let state):
            restore(state)
        case .deadlineReached(let name, let jobID):
            deadlineReached(name, jobID: jobID)
        case .runStarted(let name, let jobID, let run, let pid):
            runStarted(name, jobID: jobID, run: run, pid: pid)
        case .runFinished(let name, let jobID, let run, let outcome):
            runFinished(name, jobID: jobID, run: run, outcome: outcome)
        case .wallClockSet(let reason):
            wallClockSet(reason: reason)
        case .zonesChanged(let schedules):
            zonesChanged(schedules)
        case .ownerGone(let name, let jobID, let reason):
            if jobs[name]?.id == jobID { remove(name, reason: reason) }
        case .connectionClosed(let connection):
            for name in jobs.owned(byConnection: connection) {
                remove(name, reason: "cancelled: the control connection that added it (owner=connection) closed")
            }
        case .shutdown:
            shutdown()
        case .killAll(let reason):
            killAll(reason: reason)
        case .clusterView(let view):
            applyClusterView(view)
        case .claimDecided(let name, let jobID, let token, let won, let reason):
            claimDecided(name, jobID: jobID, token: token, won: won, reason: reason)
        case .sharedJob(let shared):
            applySharedJob(shared)
        case .sharedJobsSynced(let all):
            let names = Set(all.map(\.spec.name))
            for name in jobs.keys.sorted() where jobs[name]!.shared && jobs[name]!.origin == .runtime && !names.contains(name) {
                remove(name, reason: "no longer in the cluster")
            }
            for shared in all { applySharedJob(shared) }
        case .sharedJobsRemoved(let names, let revision):
            for name in names {
                guard let job = jobs[name], job.shared, job.origin == .runtime, revision > job.sharedRevision else { continue }
                remove(name, reason: "cancelled in the cluster", stopRuns: true)
            }
        case .sharedRevision(let names, let revision):
            for name in names where jobs[name]?.shared == true { jobs[name]!.sharedRevision = revision }
        case .remoteRun(let record, let final):
            noteRemoteRun(record, final: final)
        }
        switch input {
        case .changeSaved(_, let moreToCome): burstGoesOn = moreToCome
        case .changeNotSaved: burstGoesOn = false
        default: break
        }
        if !burstGoesOn { logAdded() }
        if let answer { out.append(.reply(answer)) }
        return out
    }

    // MARK: - Reading

    package func job(_ name: JobName) -> EngineJob? { jobs[name] }

    /// A name for `EXEC` that no job in this engine's life has had.
    package mutating func generateName() -> JobName {
        while true {
            let candidate = "\(Self.generatedNamePrefix)\(nextExecNumber)"
            nextExecNumber += 1
            if !generatedNamesEverUsed.contains(candidate), let name = try? JobName(candidate) { return name }
        }
    }

    static let generatedNamePrefix = "exec-"

    /// Remembers that a job had `name`, if `generateName` could hand it out.
    mutating func noteNameUsed(_ name: JobName) {
        if name.rawValue.hasPrefix(Self.generatedNamePrefix) { generatedNamesEverUsed.insert(name.rawValue) }
    }

    /// Jobs carrying `tag`, sorted by name.
    package func names(withTag tag: String) -> [JobName] {
        jobNames(withTag: tag).sorted()
    }

    /// Jobs carrying `tag`, in no order: a caller with many of them sorts them off its queue.
    package func jobNames(withTag tag: String) -> [JobName] {
        Array(jobs.names(withTag: tag))
    }

    /// The wall-clock time of the job's next fire, if it is scheduled (as of `now`: a reading, not an
    /// input). A shared job another node runs: the schedule's next time.
    package func nextFire(_ job: EngineJob, at now: Instant) -> WallTime? {
        guard job.state == .scheduled else { return nil }
        if job.shared, !runsHere(job) { return scheduleNextFire(job, at: now) }
        if let mono = job.nextMono { return now.wall(of: mono) }
        return job.nextWall
    }

    // MARK: - Emitting

    /// A log line (built only when the settings want logs: `simulate` does not).
    mutating func log(_ level: LogLevel, _ name: JobName?, run: Int? = nil, _ message: @autoclosure () -> String) {
        guard settings.logs else { return }
        out.append(.log(level, job: name, run: run, message()))
    }

    /// A log line about the daemon, not one job.
    mutating func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard settings.logs else { return }
        out.append(.log(level, job: nil, run: nil, message()))
    }

    /// Logs the jobs added since the last time: a line each, or for more than `addedLinesMax` one line
    /// per origin that names the first ten (a client pipelining 100,000 `ADD`s made 100,000 lines, and
    /// journald keeps 10,000 a service per 30 s by default; each job's `WATCH` event and `WHY` stay).
    mutating func logAdded() {
        guard !addedUnlogged.isEmpty else { return }
        defer { addedUnlogged.removeAll(keepingCapacity: addedUnlogged.count <= 1_024) }
        guard addedUnlogged.count > Self.addedLinesMax else {
            for job in addedUnlogged {
                log(.info, job.name, "added (\(job.origin.label)): \(job.spec.schedule.summary): \(job.spec.action.summary)")
            }
            return
        }
        var order: [String] = []
        var byOrigin: [String: [JobName]] = [:]
        for job in addedUnlogged {
            let origin = job.origin.label
            if byOrigin[origin] == nil { order.append(origin) }
            byOrigin[origin, default: []].append(job.name)
        }
        for origin in order { log(.info, Self.namesSummary("added", byOrigin[origin]!, detail: " (\(origin))")) }
    }

    mutating func decide(_ decision: Decision) {
        out.append(.decision(decision))
    }
}

/// SplitMix64: a small, fast, seedable generator (for reproducible jitter).
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// A run by its job's id and its number.
struct RunKey: Hashable, Sendable {
    var jobID: UInt64
    var run: Int
}
