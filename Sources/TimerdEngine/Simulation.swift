import TimerdCore

/// Runs config jobs through the engine in virtual time (`timerctl simulate`): the same engine the
/// daemon runs, driven by a virtual clock instead of Dispatch timers, with runs that take a given time
/// instead of processes, spans where the daemon is down, and steps of the wall clock.
///
/// Instants in the options are on the true time line (the host's monotonic time, as if its wall clock
/// were never set); the times printed are what the daemon's wall clock reads, steps included.
package struct Simulation {
    package struct Options: Sendable {
        package var from: WallTime
        package var until: WallTime
        /// How long each job's runs take (default: no time at all).
        package var runDurations: [JobName: Duration] = [:]
        /// How each job's runs end (`--run-result JOB=RESULT`; default `ok`): retries, failure chains and
        /// `pause_after_failures` show in the simulation.
        package var runResults: [JobName: RunOutcome.Result] = [:]
        /// Spans during which the daemon is not running.
        package var down: [ClosedRange<WallTime>] = []
        /// At each instant, the wall clock is set by the offset.
        package var clockSteps: [(at: WallTime, offset: Duration)] = []
        package var maxRunning = Limits.defaultMaxRunning
        /// The config's `[pool "NAME"]` caps.
        package var pools: [String: Int] = [:]
        package var machineID = ""
        package var seed: UInt64 = 0

        package init(from: WallTime, until: WallTime) {
            self.from = from
            self.until = until
        }
    }

    /// One line of the output: a decision at an instant.
    package struct Line: Sendable, Equatable {
        /// The daemon's wall clock when it was made.
        package var at: WallTime
        /// Nil for the daemon's own events (`stop`, `start`, `clock`).
        package var job: JobName?
        /// `fire`, `start`, `finish`, `skip`, `miss`, `hold`, `queue`; `stop`, `start`, `clock`, `mode`.
        package var event: String
        package var scheduled: WallTime?
        package var run: Int?
        package var reason: String?
        /// A finished run's result.
        package var result: RunOutcome.Result?
        /// How many fires a `skip` or `miss` stands for.
        package var count = 1
        /// How late a `fire` was handled.
        package var lateness: Duration = .zero

        /// What the text form shows after the event: `run 3`, `run 3 ok`, `5 fires`, `30s late`.
        package var detail: String? {
            switch event {
            case "start": return run.map { "run \($0)" }
            case "finish": return run.map { "run \($0) \(result?.rawValue ?? "")" }
            case "skip", "miss": return count == 1 ? nil : "\(count) fires"
            case "fire": return job != nil && lateness > .milliseconds(1) ? "\(DurationText.format(lateness)) late" : nil
            default: return nil
            }
        }
    }

    private let jobs: [DeclaredJob]
    private let options: Options
    private var engine: Engine
    /// Where each line goes as it is decided.
    private let emit: (Line) -> Void
    /// The true time line: monotonic instants, and the wall clock's offset from it.
    private var mono: MonoInstant {
        didSet { now = Instant(mono: mono, wall: trueTime(mono) + wallOffset) }
    }
    private let start: MonoInstant
    private var wallOffset: Duration = .zero {
        didSet { now = Instant(mono: mono, wall: trueTime(mono) + wallOffset) }
    }
    private var armed: [JobName: (jobID: UInt64, deadline: Deadline)] = [:]
    /// Runs in flight and when each ends.
    private var running: [(end: MonoInstant, job: JobName, jobID: UInt64, run: Int, started: MonoInstant)] = []
    private var isDown = false
    /// What `state.db` would hold across a stop.
    private var store = RestoredState()

    package init(jobs: [DeclaredJob], options: Options, emit: @escaping (Line) -> Void) {
        self.jobs = jobs
        self.options = options
        self.emit = emit
        start = MonoInstant(nanosecondsSinceBoot: 3_600_000_000_000)
        mono = start
        now = Instant(mono: start, wall: options.from)
        engine = Engine(settings: Self.settings(options))
    }

    private static func settings(_ options: Options) -> EngineSettings {
        var settings = EngineSettings(maxRunning: options.maxRunning, machineID: options.machineID, seed: options.seed)
        // Neither logs nor `WHY` records: the lines are the decisions.
        settings.logs = false
        settings.fireRecordsKept = 0
        return settings
    }

    /// Runs the simulation from `from` to `until`, handing every decision to `emit` in time order.
    package static func run(jobs: [DeclaredJob], options: Options, emit: @escaping (Line) -> Void) {
        var simulation = Simulation(jobs: jobs, options: options, emit: emit)
        simulation.runToEnd()
    }

    /// Every decision from `from` to `until`, in time order.
    package static func run(jobs: [DeclaredJob], options: Options) -> [Line] {
        final class Collected { var lines: [Line] = [] }
        let collected = Collected()
        run(jobs: jobs, options: options) { collected.lines.append($0) }
        return collected.lines
    }

    /// Both clocks now: the true time line plus the wall clock's steps (kept, not recomputed per use).
    private var now: Instant

    private func trueTime(_ instant: MonoInstant) -> WallTime { options.from + (instant - start) }

    private func monoAt(trueTime time: WallTime) -> MonoInstant { start + (time - options.from) }

    private mutating func runToEnd() {
        let end = monoAt(trueTime: options.until)
        var downs = options.down.filter { $0.upperBound > options.from }.sorted { $0.lowerBound < $1.lowerBound }
        var steps = options.clockSteps.sorted { $0.at < $1.at }
        if let first = downs.first, first.lowerBound <= options.from {
            isDown = true
        } else {
            apply(engine.handle(.reload(jobs, maxRunning: options.maxRunning, pools: options.pools), at: now))
        }
        while true {
            // The next thing that happens, on the true time line; ties: runs end first, then the host
            // (stops, clock steps), then deadlines in name order.
            var next = end
            if let run = running.min(by: { $0.end < $1.end }) { next = min(next, run.end) }
            if let down = downs.first { next = min(next, monoAt(trueTime: isDown ? down.upperBound : down.lowerBound)) }
            if let step = steps.first { next = min(next, monoAt(trueTime: step.at)) }
            let due = isDown ? nil : nextDeadline()
            if let due { next = min(next, due.at) }
            if next > mono { mono = next }
            if let index = running.firstIndex(where: { $0.end <= mono }) {
                let run = running.remove(at: index)
                let result = options.runResults[run.job] ?? .ok
                finish(run, result: result, reason: result == .ok ? "exited with status 0" : "\(result.rawValue) (--run-result)")
                continue
            }
            if let down = downs.first {
                if !isDown, monoAt(trueTime: down.lowerBound) <= mono {
                    stop()
                    continue
                }
                if isDown, monoAt(trueTime: down.upperBound) <= mono {
                    downs.removeFirst()
                    if let following = downs.first, following.lowerBound <= down.upperBound { continue }
                    restart()
                    continue
                }
            }
            if let step = steps.first, monoAt(trueTime: step.at) <= mono {
                steps.removeFirst()
                wallOffset = wallOffset + step.offset
                if !isDown {
                    apply(engine.handle(.wallClockSet(reason: "clock stepped by \(Self.signed(step.offset))"), at: now))
                }
                continue
            }
            if let due, due.at <= mono {
                armed[due.job] = nil
                apply(engine.handle(.deadlineReached(due.job, jobID: due.jobID), at: now))
                continue
            }
            if mono >= end { break }
        }
    }

    /// The earliest armed deadline on the true time line (wall deadlines follow the wall clock).
    private func nextDeadline() -> (at: MonoInstant, job: JobName, jobID: UInt64)? {
        var best: (at: MonoInstant, job: JobName, jobID: UInt64)?
        let current = now
        for (name, entry) in armed {
            let at: MonoInstant
            switch entry.deadline {
            case .mono(let instant): at = instant
            case .wall(let time): at = current.mono(of: time)
            }
            if best == nil || at < best!.at || (at == best!.at && name < best!.job) { best = (at, name, entry.jobID) }
        }
        return best
    }

    private mutating func apply(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .arm(let name, let jobID, let deadline, _):
                armed[name] = (jobID, deadline)
            case .disarm(let name, let jobID):
                if armed[name]?.jobID == jobID { armed[name] = nil }
            case .startRun(let start):
                let duration = options.runDurations[start.job] ?? .zero
                running.append((mono + duration, start.job, start.jobID, start.run, mono))
            case .stopRun(let name, _, let run, let reason, _):
                // A stopped run ends at once, killed.
                if let index = running.firstIndex(where: { $0.job == name && $0.run == run }) {
                    let entry = running.remove(at: index)
                    finish(entry, result: .killed, reason: reason)
                }
            case .persist(let change):
                remember(change)
            case .writeAhead(let number, let records):
                // The simulated store never fails.
                records.forEach { remember($0) }
                apply(engine.handle(.changeSaved(number), at: now))
            case .decision(let decision):
                note(decision)
            case .reply(.success(.partlyApplied(let number))):
                apply(engine.handle(.continueChange(number), at: now))
            case .claim, .publishRun, .unwatchOwner, .notifyTransition, .log, .drained, .reply:
                break
            }
        }
    }

    private mutating func finish(_ run: (end: MonoInstant, job: JobName, jobID: UInt64, run: Int, started: MonoInstant),
                                 result: RunOutcome.Result, reason: String) {
        let outcome = RunOutcome(
            result: result, exitCode: result == .ok ? 0 : nil, reason: reason, finishedWall: now.wall, duration: mono - run.started)
        apply(engine.handle(.runFinished(run.job, jobID: run.jobID, run: run.run, outcome), at: now))
    }

    /// The daemon stops: no more fires; runs still going are stopped (as when the stop grace runs out).
    private mutating func stop() {
        emit(Line(at: now.wall, job: nil, event: "stop", reason: "the daemon is down"))
        apply(engine.handle(.shutdown, at: now))
        apply(engine.handle(.killAll(reason: "timerd stopped"), at: now))
        armed = [:]
        isDown = true
    }

    /// The daemon starts again: the config, then what `state.db` kept, with each job's misfire policy.
    private mutating func restart() {
        isDown = false
        emit(Line(at: now.wall, job: nil, event: "start"))
        engine = Engine(settings: Self.settings(options))
        // Config jobs go on numbering their runs from their history, as the daemon's do.
        var declared = jobs
        for index in declared.indices { declared[index].runs = store.lastRuns[declared[index].spec.name]?.run ?? 0 }
        apply(engine.handle(.reload(declared, maxRunning: options.maxRunning, pools: options.pools), at: now))
        apply(engine.handle(.restore(store), at: now))
    }

    private mutating func remember(_ change: Persist) {
        switch change {
        case .fire(let name, _, let lastScheduled, true):
            store.configFires[name] = lastScheduled
        case .forgetConfigJob(let name):
            store.configFires[name] = nil
        case .run(let record, _):
            store.lastRuns[record.job] = record
        case .fireRecord(let record, _):
            store.fireSequences[record.job] = max(store.fireSequences[record.job] ?? 0, record.sequence)
        case .job, .deleteJob, .fire, .cancelJobs, .cancelledGone:
            break  // config jobs only: nothing runtime to keep
        }
    }

    private mutating func note(_ decision: Decision) {
        let at = now.wall
        switch decision {
        case .fired(let name, let scheduled, let lateness, _):
            emit(Line(at: at, job: name, event: "fire", scheduled: scheduled, lateness: lateness))
        case .started(let name, let run, let scheduled, _):
            emit(Line(at: at, job: name, event: "start", scheduled: scheduled, run: run))
        case .finished(let name, let run, let outcome):
            emit(Line(at: at, job: name, event: "finish", run: run, reason: outcome.result == .ok ? nil : outcome.reason,
                      result: outcome.result))
        case .skipped(let name, let scheduled, let count, let reason):
            emit(Line(at: at, job: name, event: "skip", scheduled: scheduled, reason: reason, count: count))
        case .missed(let name, let scheduled, let count, let reason):
            emit(Line(at: at, job: name, event: "miss", scheduled: scheduled, reason: reason, count: count))
        case .held(let name, let scheduled, let reason):
            emit(Line(at: at, job: name, event: "hold", scheduled: scheduled, reason: reason))
        case .queued(let name, let scheduled, let reason):
            emit(Line(at: at, job: name, event: "queue", scheduled: scheduled, reason: reason))
        case .retrying(let name, let run, _, _, let reason):
            emit(Line(at: at, job: name, event: "retry", run: run, reason: reason))
        case .clockSet(let reason, _):
            emit(Line(at: at, job: nil, event: "clock", reason: reason))
        case .modeChanged(let mode, let previous):
            emit(Line(at: at, job: nil, event: "mode", reason: "\(previous) → \(mode)"))
        case .added, .running, .cancelled, .paused, .resumed:
            break
        }
    }

    private static func signed(_ span: Duration) -> String {
        span < .zero ? "-\(DurationText.format(.zero - span))" : "+\(DurationText.format(span))"
    }
}
