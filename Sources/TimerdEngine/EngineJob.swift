import TimerdCore

/// The fire instants of a repeating schedule on the monotonic clock: `first + k·interval`.
///
/// Keeping the grid (instead of "last fire + interval") keeps a job's phase: a late fire does not push
/// every later one back, and a resumed job stays on its original beat.
package struct FireGrid: Equatable, Sendable {
    /// Fire number 0.
    package var first: MonoInstant
    package var interval: Duration

    package init(first: MonoInstant, interval: Duration) {
        self.first = first
        self.interval = max(.nanoseconds(1), interval)
    }

    package func instant(_ index: Int64) -> MonoInstant {
        first + .nanoseconds(index.multipliedReportingOverflow(by: interval.nanoseconds).partialValue)
    }

    /// The index of the first grid point strictly after `time` (0 if `time` is before the first one).
    package func index(after time: MonoInstant) -> Int64 {
        guard time >= first else { return 0 }
        return (time - first).nanoseconds / interval.nanoseconds + 1
    }

    /// The index of the last grid point at or before `time`, or nil when `time` is before the first one.
    package func index(atOrBefore time: MonoInstant) -> Int64? {
        guard time >= first else { return nil }
        return (time - first).nanoseconds / interval.nanoseconds
    }
}

/// One fire that has been accepted but not started yet.
package struct PendingFire: Sendable, Equatable {
    package var kind: FireKind
    /// When it was due, on both clocks.
    package var scheduled: MonoInstant
    package var scheduledWall: WallTime
    /// Its `WHY` record (0: a fire by hand, which has none).
    package var sequence: UInt64
    /// 1 for the fire's first run; more for a command job's retries of it (`retries`).
    package var attempt = 1
    /// What a run by hand adds to the job (`RUN … env=… -- ARG…`).
    package var parameters: RunParameters? = nil
    /// The upstream run whose end fired it (`after=`).
    package var trigger: RunTrigger? = nil
}

/// The run of an upstream job whose end fired a job that follows it (`after=`).
package struct RunTrigger: Sendable, Equatable {
    package var job: JobName
    package var run: Int
}

/// A command job's next attempt at a fire whose run failed (`retries`): due at `due` on the monotonic clock.
package struct PendingRetry: Sendable, Equatable {
    package var due: MonoInstant
    package var fire: PendingFire
}

/// A run in progress, as the engine sees it.
package struct ActiveRun: Sendable, Equatable {
    package var id: Int
    package var startedMono: MonoInstant
    package var startedWall: WallTime
    package var kind: FireKind
    /// When the fire was due (for the history).
    package var scheduledWall: WallTime
    package var lateness: Duration
    package var sequence: UInt64
    /// Which attempt at its fire this run is (1: the first).
    package var attempt = 1
    package var parameters: RunParameters? = nil
    package var trigger: RunTrigger? = nil
}

/// Everything the engine knows about one job: its spec, where its schedule stands, what waits and what
/// runs. No timers, handles or descriptors: those belong to the interpreter.
///
/// A class, owned by one engine's `JobTable`: a fire reads and changes a job a dozen times, and a
/// struct of this size was copied in and out of the table each time (most of `simulate`'s time went
/// there). Only the engine changes it, on whatever single thread drives the engine; the interpreter
/// reads it between inputs.
///
/// The daemon keeps one for every job, so it is kept small (`docs/architecture.md`, "Memory per
/// job"): what only a job that has run, waited, skipped or been held has is in `activity`, made when
/// first written; a calendar schedule is in `civilState`; the stored fields are in an order that lets
/// the one-byte ones fill the gaps after the optionals.
package final class EngineJob: @unchecked Sendable {
    package let id: UInt64
    /// Its name (the spec's, kept here: it is read at every step).
    package let name: JobName
    /// Boxed: a spec holds a score of strings and arrays, and a job is copied in and out of the table
    /// several times per fire; one reference is cheaper to copy than twenty.
    package var spec: JobSpec {
        get { specBox.spec }
        set { specBox = SpecBox(newValue) }
    }
    private(set) var specBox: SpecBox
    package var origin: JobOrigin
    private var civilState: CivilState?
    private var activity: JobActivity?

    // Schedule position.
    package var nextIndex: Int64 = 0
    /// Scheduled fires accepted so far (checked against `count`).
    package var acceptedFires = 0

    // Durable position.
    package var addedWall = WallTime(nanosecondsSinceEpoch: 0)

    // Cluster mode.
    /// etcd's revision of the record this job was last built from.
    package var sharedRevision: Int64 = 0

    /// Numbers this job's due fires (`FireRecord.sequence`).
    package var fireSequence: UInt64 = 0
    package var grid: FireGrid?
    /// The uid of the user who added it (timerd's own for config jobs).
    package let ownerUID: UInt32
    /// Monotonic deadline of the next fire (`every`, `in`, and a fire set by `RESUME after=`), or nil.
    package var nextMono: MonoInstant?
    package var state: JobState = .scheduled
    package var shared = false
    /// Wall-clock deadline of the next fire (`at`, cron and calendar, jitter included), or nil.
    package var nextWall: WallTime?
    /// `every` jobs: the wall time of grid fire 0, so the phase survives restarts.
    package var anchorWall: WallTime?
    /// The scheduled time of the last scheduled fire: missed fires are the schedule's times after it.
    package var lastScheduledWall: WallTime?
    /// The control connection of an `owner=connection` job.
    package var ownerConnection: Int?

    package init(id: UInt64, spec: JobSpec, origin: JobOrigin, ownerUID: UInt32) {
        self.id = id
        name = spec.name
        specBox = SpecBox(spec)
        self.origin = origin
        self.ownerUID = ownerUID
    }

    /// Fires accepted and not started: queued behind a run, or waiting for a slot.
    package var pending: Int { (queued == nil ? 0 : 1) + waitingForSlot }

    /// Nothing runs, waits or is held: a finished job in this state can be forgotten.
    package var isIdle: Bool {
        active.isEmpty && queued == nil && waitingForSlot == 0 && heldFire == nil && replays.isEmpty && claiming == 0
            && pendingRetry == nil
    }

    /// The next deadline to arm, if the job is scheduled and has one.
    package var deadline: Deadline? {
        guard state == .scheduled else { return nil }
        if let nextMono { return .mono(nextMono) }
        if let nextWall { return .wall(nextWall) }
        return nil
    }

    // MARK: - A calendar schedule

    /// A cron or calendar job's schedule, resolved in its zone (out of line: large, and most jobs have
    /// none). A new schedule keeps the job's place on it (`nextNominal`, `civilBase`).
    package var civil: CivilSchedule? {
        get { civilState?.schedule }
        set { civilState = newValue.map { CivilState($0, nextNominal: civilState?.nextNominal, base: civilState?.base) } }
    }

    /// The scheduled time (jitter not included) of a cron or calendar job's next fire. Only a job with a
    /// calendar schedule keeps one.
    package var nextNominal: WallTime? {
        get { civilState?.nextNominal }
        set { civilState?.nextNominal = newValue }
    }

    /// Where a cron or calendar schedule counts from: when it was armed, then each fire's scheduled time.
    /// Only a job with a calendar schedule keeps one.
    package var civilBase: WallTime? {
        get { civilState?.base }
        set { civilState?.base = newValue }
    }

    // MARK: - Runs and what happened (`activity`)

    /// The activity record, made on the first write that is not a default.
    private var writableActivity: JobActivity {
        if let activity { return activity }
        let made = JobActivity()
        activity = made
        return made
    }

    /// `misfire=all`: missed fires still to run, oldest first, each after the previous run ends.
    package var replays: [WallTime] {
        get { activity?.replays ?? [] }
        set { if activity != nil || !newValue.isEmpty { writableActivity.replays = newValue } }
    }

    package var runs: Int {
        get { activity?.runs ?? 0 }
        set { if activity != nil || newValue != 0 { writableActivity.runs = newValue } }
    }

    package var nextRunID: Int {
        get { activity?.nextRunID ?? 1 }
        set { if activity != nil || newValue != 1 { writableActivity.nextRunID = newValue } }
    }

    package var active: [ActiveRun] {
        get { activity?.active ?? [] }
        set { if activity != nil || !newValue.isEmpty { writableActivity.active = newValue } }
    }

    /// The one fire queued behind a running one (`overlap=queue`, or `replace` waiting for the old run).
    package var queued: PendingFire? {
        get { activity?.queued }
        set { if activity != nil || newValue != nil { writableActivity.queued = newValue } }
    }

    package var waitingForSlot: Int {
        get { activity?.waitingForSlot ?? 0 }
        set { if activity != nil || newValue != 0 { writableActivity.waitingForSlot = newValue } }
    }

    /// Fires sent to be claimed in etcd, not decided yet.
    package var claiming: Int {
        get { activity?.claiming ?? 0 }
        set { if activity != nil || newValue != 0 { writableActivity.claiming = newValue } }
    }

    /// The last run started: its number, when, and how late (nil for a run by hand, as in its history).
    package var lastStarted: (id: Int, at: WallTime, lateness: Duration?)? {
        get { activity?.lastStarted }
        set { if activity != nil || newValue != nil { writableActivity.lastStarted = newValue } }
    }

    package var lastOutcome: (id: Int, outcome: RunOutcome)? {
        get { activity?.lastOutcome }
        set { if activity != nil || newValue != nil { writableActivity.lastOutcome = newValue } }
    }

    package var skipped: Int {
        get { activity?.skipped ?? 0 }
        set { if activity != nil || newValue != 0 { writableActivity.skipped = newValue } }
    }

    package var lastSkip: (at: WallTime, reason: String)? {
        get { activity?.lastSkip }
        set { if activity != nil || newValue != nil { writableActivity.lastSkip = newValue } }
    }

    package var runsByResult: ResultCounts {
        get { activity?.runsByResult ?? ResultCounts() }
        set { if activity != nil || newValue != ResultCounts() { writableActivity.runsByResult = newValue } }
    }

    /// The next attempt at a fire whose run failed (`retries`), while one is due.
    package var pendingRetry: PendingRetry? {
        get { activity?.pendingRetry }
        set { if activity != nil || newValue != nil { writableActivity.pendingRetry = newValue } }
    }

    /// The result of the last run that was not retried: what `on_failure`/`on_recovery` compare with.
    package var lastFinalResult: RunOutcome.Result? {
        get { activity?.lastFinalResult }
        set { if activity != nil || newValue != nil { writableActivity.lastFinalResult = newValue } }
    }

    /// Runs that did not end `ok` since the last that did (or since the job was resumed).
    package var consecutiveFailures: Int {
        get { activity?.consecutiveFailures ?? 0 }
        set { if activity != nil || newValue != 0 { writableActivity.consecutiveFailures = newValue } }
    }

    /// Why the job is paused, when timerd paused it (`pause_after_failures`); nil for a pause by request.
    package var pauseReason: String? {
        get { activity?.pauseReason }
        set { if activity != nil || newValue != nil { writableActivity.pauseReason = newValue } }
    }

    /// What the job's runs used, added up (the metrics file's counters).
    package var usageTotals: UsageTotals {
        get { activity?.usageTotals ?? UsageTotals() }
        set { if activity != nil || newValue != UsageTotals() { writableActivity.usageTotals = newValue } }
    }

    package var lastSuccess: WallTime? {
        get { activity?.lastSuccess }
        set { if activity != nil || newValue != nil { writableActivity.lastSuccess = newValue } }
    }

    /// The one fire held while the daemon is in a mode the job does not run in.
    package var heldFire: PendingFire? {
        get { activity?.heldFire }
        set { if activity != nil || newValue != nil { writableActivity.heldFire = newValue } }
    }

    package var heldSince: WallTime? {
        get { activity?.heldSince }
        set { if activity != nil || newValue != nil { writableActivity.heldSince = newValue } }
    }
}

/// What only a job that has run, waited, skipped or been held has (see `EngineJob`).
final class JobActivity {
    var replays: [WallTime] = []
    var runs = 0
    var nextRunID = 1
    var active: [ActiveRun] = []
    var queued: PendingFire?
    var waitingForSlot = 0
    var claiming = 0
    var lastStarted: (id: Int, at: WallTime, lateness: Duration?)?
    var lastOutcome: (id: Int, outcome: RunOutcome)?
    var skipped = 0
    var lastSkip: (at: WallTime, reason: String)?
    var runsByResult = ResultCounts()
    var usageTotals = UsageTotals()
    var consecutiveFailures = 0
    var pauseReason: String?
    var pendingRetry: PendingRetry?
    var lastFinalResult: RunOutcome.Result?
    var lastSuccess: WallTime?
    var heldFire: PendingFire?
    var heldSince: WallTime?
}

/// What a job's runs used, added up over the runs that said (`RunUsage`).
package struct UsageTotals: Sendable, Equatable {
    package var cpu: Duration = .zero
    package var ioReadBytes: Int64 = 0
    package var ioWriteBytes: Int64 = 0

    package init() {}

    package mutating func add(_ usage: RunUsage) {
        cpu += usage.cpu ?? .zero
        ioReadBytes += usage.ioReadBytes ?? 0
        ioWriteBytes += usage.ioWriteBytes ?? 0
    }
}

/// A cron or calendar job's schedule and its place on it (see `EngineJob.civil`).
final class CivilState {
    let schedule: CivilSchedule
    var nextNominal: WallTime?
    var base: WallTime?

    init(_ schedule: CivilSchedule, nextNominal: WallTime?, base: WallTime?) {
        self.schedule = schedule
        self.nextNominal = nextNominal
        self.base = base
    }
}

/// Holds a `JobSpec` out of line (see `EngineJob.spec`).
package final class SpecBox: Sendable {
    let spec: JobSpec
    init(_ spec: JobSpec) { self.spec = spec }
}
