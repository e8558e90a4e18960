import TimerdCore

/// Where a job came from.
package enum JobOrigin: Equatable, Sendable {
    /// Out of line: a word instead of three in every job, and most jobs are runtime ones.
    indirect case config(file: String, line: Int)
    case runtime

    package var label: String {
        if case .runtime = self { return "runtime" }
        return "config"
    }
}

/// Why a fire happened: on schedule, or by hand (`RUN`, which does not count toward `count`).
package enum FireKind: Sendable {
    case scheduled
    case manual
}

package enum JobState: String, Sendable {
    case scheduled, paused, finished
}

/// When to wake a job up: a monotonic instant (interval and delay jobs) or a wall-clock time (`at`, cron
/// and calendar jobs, which must follow the wall clock when it is set).
package enum Deadline: Equatable, Sendable {
    case mono(MonoInstant)
    case wall(WallTime)
}

/// How a run ended.
package struct RunOutcome: Sendable, Equatable {
    package enum Result: String, Sendable, CaseIterable { case ok, failed, timeout, killed }
    package var result: Result
    package var exitCode: Int?
    package var signal: Int?
    /// A webhook run's last HTTP status.
    package var httpStatus: Int?
    /// Human-readable cause, e.g. "exited with status 3" or "timed out after 5s; killed with SIGTERM".
    package var reason: String
    /// The tail of the run's output. The engine passes it on (history, notices) but does not keep it:
    /// the interpreter holds the last outputs for `show`, under `max_output_memory`.
    package var output: String
    package var finishedWall: WallTime
    package var duration: Duration
    /// What a command's run used (empty for a webhook, or a run that never started its program).
    package var usage: RunUsage

    package init(result: Result, exitCode: Int? = nil, signal: Int? = nil, httpStatus: Int? = nil, reason: String,
                 output: String = "", finishedWall: WallTime, duration: Duration, usage: RunUsage = RunUsage()) {
        self.result = result
        self.exitCode = exitCode
        self.signal = signal
        self.httpStatus = httpStatus
        self.reason = reason
        self.output = output
        self.finishedWall = finishedWall
        self.duration = duration
        self.usage = usage
    }

    /// `ok: exited with status 0 after 12ms`, for the log.
    package var summary: String {
        "\(result.rawValue): \(reason) after \(DurationText.format(.milliseconds(duration.nanoseconds / 1_000_000)))"
    }
}

/// What a command's run used, each nil where it is not known (`docs/observability.md`, "Resource
/// accounting"): with a cgroup for the run, everything in it (`cpu.stat`, and `memory.peak` and
/// `io.stat` where those controllers are delegated); else, or for what the cgroup cannot say, the main
/// process and the children it reaped (`wait4`).
package struct RunUsage: Sendable, Equatable {
    /// CPU time, user and system.
    package var cpu: Duration?
    /// The most memory in use at once: the cgroup's peak, or the largest resident set of one process.
    package var memoryPeakBytes: Int64?
    package var ioReadBytes: Int64?
    package var ioWriteBytes: Int64?

    package init(cpu: Duration? = nil, memoryPeakBytes: Int64? = nil, ioReadBytes: Int64? = nil, ioWriteBytes: Int64? = nil) {
        self.cpu = cpu
        self.memoryPeakBytes = memoryPeakBytes
        self.ioReadBytes = ioReadBytes
        self.ioWriteBytes = ioWriteBytes
    }

    /// CPU time in milliseconds (microsecond precision), as `show`, `history` and `WATCH` give it.
    package var cpuMilliseconds: Double? {
        cpu.map { Double($0.nanoseconds / 1_000) / 1_000 }
    }
}

/// Runs counted by result (a dictionary would cost an allocation and a reference per job).
package struct ResultCounts: Sendable, Equatable {
    private var counts: (ok: Int, failed: Int, timeout: Int, killed: Int) = (0, 0, 0, 0)

    package init() {}

    package subscript(result: RunOutcome.Result) -> Int {
        get {
            switch result {
            case .ok: counts.ok
            case .failed: counts.failed
            case .timeout: counts.timeout
            case .killed: counts.killed
            }
        }
        set {
            switch result {
            case .ok: counts.ok = newValue
            case .failed: counts.failed = newValue
            case .timeout: counts.timeout = newValue
            case .killed: counts.killed = newValue
            }
        }
    }

    package static func == (lhs: ResultCounts, rhs: ResultCounts) -> Bool {
        RunOutcome.Result.allCases.allSatisfy { lhs[$0] == rhs[$0] }
    }
}

/// How a paused job comes back.
package enum ResumeMode: Sendable, Equatable {
    case onSchedule
    case now
    case after(Duration)

    package var isOnSchedule: Bool {
        if case .onSchedule = self { return true }
        return false
    }
}

/// Who asks for a change: root and timerd's own user may change any job, others only their own.
package struct Requester: Sendable, Equatable {
    package var uid: UInt32
    package var isAdmin: Bool
    /// For log lines about refusals (e.g. `uid 1000 (pid 42)`).
    package var label: String

    package init(uid: UInt32, isAdmin: Bool, label: String) {
        self.uid = uid
        self.isAdmin = isAdmin
        self.label = label
    }

    package func owns(_ ownerUID: UInt32) -> Bool { isAdmin || ownerUID == uid }
}

/// What became of one due fire, as `timerctl why` and `timerctl simulate` tell it.
package enum FireOutcome: String, Sendable, Equatable {
    /// A run started for it.
    case ran
    /// Not run: paused, overlap, rate limit, `misfire=skip` beyond the grace, a held fire already waiting.
    case skipped
    /// Not run because the daemon could not fire in time (stopped, starved, the clock jumped).
    case missed
    /// Waiting for a mode it runs in.
    case held
    /// Waiting behind a run still going (`overlap=queue`/`replace`).
    case queued
    /// Waiting for a run slot (`max_running`, a pool).
    case waiting
}

/// One due fire and what became of it (`WHY`). Updated while it waits (`queued` → `ran`), and when its
/// run finishes (`result`).
package struct FireRecord: Sendable, Equatable {
    package var job: JobName
    /// Numbers the job's fires in this daemon's life; with `job` the record's identity while it changes.
    package var sequence: UInt64
    /// The due instant (the scheduled time, jitter included).
    package var scheduled: WallTime
    package var outcome: FireOutcome
    package var run: Int?
    package var lateness: Duration?
    package var result: RunOutcome.Result?
    package var reason: String?

    package init(job: JobName, sequence: UInt64, scheduled: WallTime, outcome: FireOutcome, run: Int? = nil,
                 lateness: Duration? = nil, result: RunOutcome.Result? = nil, reason: String? = nil) {
        self.job = job
        self.sequence = sequence
        self.scheduled = scheduled
        self.outcome = outcome
        self.run = run
        self.lateness = lateness
        self.result = result
        self.reason = reason
    }
}

/// A decision the engine made, in the vocabulary of `timerctl simulate` and `WATCH`.
package enum Decision: Sendable, Equatable {
    /// A job was added (`origin` says whence).
    case added(JobName, origin: String)
    /// A due fire was handled (`scheduled` is when it was due, `lateness` how late it was handled).
    /// `byTimer`: its deadline was reached (false: a missed fire replayed, or `RESUME now`).
    case fired(JobName, scheduled: WallTime, lateness: Duration, byTimer: Bool)
    /// A run started for the fire due at `scheduled` (nil: by hand).
    case started(JobName, run: Int, scheduled: WallTime?, lateness: Duration?)
    /// The run's process (or request) is running (`pid` nil for a webhook).
    case running(JobName, run: Int, pid: Int32?)
    case finished(JobName, run: Int, outcome: RunOutcome)
    /// `count` fires not run, for `reason` (the text `show` gives as the last skip).
    case skipped(JobName, scheduled: WallTime?, count: Int, reason: String)
    /// `count` fires missed while the daemon could not fire (stopped, starved, the clock jumped).
    case missed(JobName, scheduled: WallTime?, count: Int, reason: String)
    /// A fire held until the daemon is in a mode the job runs in.
    case held(JobName, scheduled: WallTime, reason: String)
    /// Run `run` failed and its fire is tried again (`retries`): attempt `attempt` in `after`.
    case retrying(JobName, run: Int, attempt: Int, after: Duration, reason: String)
    /// A fire waiting behind a run or for a run slot.
    case queued(JobName, scheduled: WallTime, reason: String)
    /// A job left the table; its tags and owner as they were, for `WATCH tag=T` (it is gone by the time
    /// the decision is carried out).
    case cancelled(JobName, reason: String, tags: [String], ownerUID: UInt32)
    /// `reason`: why timerd paused it itself (`pause_after_failures`); nil for a `PAUSE`.
    case paused(JobName, reason: String?)
    case resumed(JobName)
    /// The wall clock was set.
    case clockSet(reason: String, now: WallTime)
    /// The daemon's mode changed.
    case modeChanged(to: String, from: String)
}

package enum LogLevel: Int, Sendable, Comparable {
    case debug = 7, info = 6, notice = 5, warning = 4, error = 3

    package static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue > rhs.rawValue }
}

/// What the interpreter stores (`state.db`) for the engine.
package enum Persist: Sendable, Equatable {
    /// A durable job as it is now (a runtime job without an owner).
    case job(StoredJobState)
    case deleteJob(JobName)
    /// A config job left the config: its last scheduled fire is forgotten, its history and `WHY`
    /// records stay (they are there again if a job of that name comes back).
    case forgetConfigJob(JobName)
    /// A job's last scheduled fire and run count (runtime jobs) or last scheduled fire (config jobs).
    case fire(JobName, runs: Int, lastScheduled: WallTime?, configJob: Bool)
    /// A finished run, for the history (pruned to `keep`).
    case run(FinishedRun, keep: Int)
    /// A due fire and what became of it (`WHY`), replacing the record with the same job and sequence.
    case fireRecord(FireRecord, keep: Int)
    /// A `CANCEL` of many jobs (change number, the durable jobs it removes in the order they will
    /// leave): written ahead as one record, its jobs as good as deleted once it is durable.
    case cancelJobs(UInt64, [JobName])
    /// The next of those jobs left the table: their rows go (`names`, those removed now), `done` of
    /// the cancel's jobs are dealt with; `finished` with the last.
    case cancelledGone(UInt64, [JobName], done: Int, finished: Bool)
}

/// A runtime job as `state.db` keeps it.
package struct StoredJobState: Sendable, Equatable {
    package var name: JobName
    package var options: [KeyValue]
    package var paused: Bool
    package var runs: Int
    package var addedAt: WallTime
    package var lastScheduled: WallTime?
    package var anchor: WallTime?
    package var ownerUID: UInt32
    package var shared: Bool

    package init(name: JobName, options: [KeyValue], paused: Bool, runs: Int, addedAt: WallTime, lastScheduled: WallTime?,
                 anchor: WallTime?, ownerUID: UInt32, shared: Bool) {
        self.name = name
        self.options = options
        self.paused = paused
        self.runs = runs
        self.addedAt = addedAt
        self.lastScheduled = lastScheduled
        self.anchor = anchor
        self.ownerUID = ownerUID
        self.shared = shared
    }
}

/// A finished run for the history.
package struct FinishedRun: Sendable, Equatable {
    package var job: JobName
    package var run: Int
    /// Nil for a run by hand.
    package var scheduledAt: WallTime?
    package var startedAt: WallTime
    package var lateness: Duration?
    package var outcome: RunOutcome
    /// The cluster node that ran it (nil on a single host).
    package var node: String?
    /// Which attempt at its fire it was (1: the first).
    package var attempt: Int
    /// What a run by hand added to the job.
    package var parameters: RunParameters?

    package init(job: JobName, run: Int, scheduledAt: WallTime?, startedAt: WallTime, lateness: Duration?, outcome: RunOutcome,
                 node: String? = nil, attempt: Int = 1, parameters: RunParameters? = nil) {
        self.attempt = attempt
        self.parameters = parameters
        self.job = job
        self.run = run
        self.scheduledAt = scheduledAt
        self.startedAt = startedAt
        self.lateness = lateness
        self.outcome = outcome
        self.node = node
    }
}

/// A run the interpreter must start.
package struct RunStart: Sendable {
    package var job: JobName
    package var jobID: UInt64
    package var run: Int
    package var kind: FireKind
    /// When the fire was due (`TIMERD_SCHEDULED_AT`).
    package var scheduled: WallTime
    package var lateness: Duration
    /// Which attempt at its fire this run is (1: the first; more: `retries`).
    package var attempt = 1
    /// What a run by hand adds to the job.
    package var parameters: RunParameters? = nil
    /// The upstream run whose end fired it (`after=`): `TIMERD_TRIGGERED_BY`, `TIMERD_TRIGGER_RUN`.
    package var trigger: RunTrigger? = nil
    /// The job's spec (shared with the job, not copied: an effect stays small).
    package var spec: JobSpec { specBox.spec }
    let specBox: SpecBox
    package var ownerUID: UInt32
}

/// Something the interpreter must do. Effects are data: tests assert on them, and the answer to one
/// that needs an answer (a run's end, a claim's result) comes back later as an `Input`.
package enum Effect: Sendable {
    /// Arm (or re-arm) the job's timer for `deadline`, firing up to `leeway` late.
    case arm(JobName, jobID: UInt64, Deadline, leeway: Duration)
    /// Stop the job's timer.
    case disarm(JobName, jobID: UInt64)
    case startRun(RunStart)
    /// SIGTERM (then SIGKILL after the kill grace) to a run, or SIGKILL now with `kill`.
    case stopRun(JobName, jobID: UInt64, run: Int, reason: String, kill: Bool)
    /// Cluster mode: try to win the fire of `job` at `instant` in etcd; the answer comes back as
    /// `Input.claimDecided` with `token`. A fire by its upstream's run (`triggered`, `after=`) is claimed
    /// apart from the job's schedule, whose last claimed instant a new owner goes on from.
    case claim(JobName, jobID: UInt64, instant: WallTime, triggered: Bool, token: UInt64)
    /// Cluster mode: tell the other nodes of a finished run of a shared job (`final`: its fire's last
    /// attempt, which fires the jobs that follow it).
    indirect case publishRun(FinishedRun, final: Bool)
    indirect case persist(Persist)
    /// A request's change, checked but not in effect yet: write `records` all or nothing, then answer
    /// `Input.changeSaved(change)` or `Input.changeNotSaved(change, error)`. Only then does the change
    /// take effect (or not at all), and the request get its answer.
    case writeAhead(change: UInt64, records: [Persist])
    /// Stop watching the job's owner process (`owner=pid:N`; the interpreter watches it from the `ADD`).
    case unwatchOwner(JobName, jobID: UInt64)
    /// `on_failure=` / `on_recovery=`: a finished run changed the job's health.
    indirect case notifyTransition(JobName, run: Int, outcome: RunOutcome, recovered: Bool)
    case decision(Decision)
    case log(LogLevel, job: JobName?, run: Int?, String)
    /// Every run has ended after a stop was asked for (`Input.shutdown`).
    case drained
    /// The answer to a request input (`add` … `reload`), in order with the effects of the change.
    case reply(Result<Answer, TimerdError>)
}

/// A request's change, checked, with the records that must be durable before it takes effect.
/// A `CANCEL` of more than `Engine.cancelSlice` jobs being checked, a slice per input.
struct CancelCheck: Sendable {
    var names: [JobName]
    var requester: Requester
    /// The jobs checked so far, a slice each, their ids, and the records to write ahead for them.
    var slices: [[EngineJob]] = []
    var ids: Set<UInt64>
    /// How many of them each user owns.
    var byOwner: [UInt32: Int] = [:]
    /// The durable ones (written ahead), in the order checked; the ids of the others (few: jobs of a
    /// connection or process, cluster jobs).
    var saved: [JobName] = []
    var unsaved: Set<UInt64> = []
}

/// A `CANCEL` of more than `Engine.cancelSlice` jobs, durable, whose jobs go a slice per input.
struct CancelInProgress: Sendable {
    /// The slices of jobs still to remove, the next one last. Each slice is let go of with its step:
    /// the last reference to 100,000 removed jobs, dropped at once, was a step of tens of milliseconds.
    var rest: [[EngineJob]]
    /// The ids of all its jobs: none of them fires or is listed any more (`Engine.isCancelPending`).
    /// A set made while checking, not a mark on each job: every job would carry it.
    var ids: Set<UInt64>
    /// Jobs removed so far, for the one log line at the end.
    var removed: [JobName] = []
    /// Jobs that left the table so far (removed, or gone otherwise meanwhile), in the order checked.
    var handled = 0
    /// Its jobs not written ahead (`CancelCheck.unsaved`), and how many of those written ahead left so
    /// far; nil without a record written ahead (none of its jobs durable).
    var unsaved: Set<UInt64> = []
    var savedHandled: Int?
}

struct PlannedChange: Sendable {
    enum Kind: Sendable {
        /// The job made for the request (not in the table until the change is saved).
        case add(EngineJob, AddJob)
        /// The jobs as the check found them (`Engine+Cancel.swift` for more than a slice).
        case cancel([EngineJob])
        case pause([JobName])
        case resume([JobName], ResumeMode)
        case runNow(JobName, RunParameters, force: Bool)
        /// A `checkOnly` request: nothing to change.
        case checked
    }

    var kind: Kind
    var records: [Persist]
}

/// The jobs of `ADD`s whose records are being written: names and per-owner counts, kept as they come
/// and go (a client pipelining thousands of `ADD`s has thousands of them at once).
struct AddsBeingSaved: Sendable {
    private(set) var names: Set<JobName> = []
    private(set) var byOwner: [UInt32: Int] = [:]

    mutating func insert(_ job: EngineJob) {
        names.insert(job.name)
        byOwner[job.ownerUID, default: 0] += 1
    }

    mutating func remove(_ change: PlannedChange) {
        guard case .add(let job, _) = change.kind else { return }
        names.remove(job.name)
        byOwner[job.ownerUID, default: 1] -= 1
        if byOwner[job.ownerUID] == 0 { byOwner[job.ownerUID] = nil }
    }
}
