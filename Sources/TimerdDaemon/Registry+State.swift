import Dispatch
import TimerdCore
import TimerdStore
import TimerdSystem

/// Durable state: jobs added at run time, the last scheduled fire of every job, and run history, kept in
/// the `StateStore` (SQLite). Changes are handed to the store as they happen and written on its own queue,
/// never on the registry's; a request that changed jobs is answered only once they are on disk
/// (`durable()`).
extension Registry {
    /// Jobs that come back after a restart: added at run time and not bound to an owner (a process or a
    /// connection does not outlive the daemon).
    func isDurable(_ job: Job) -> Bool { job.origin == .runtime && job.spec.owner == nil }

    func storedJob(_ job: Job) -> StoredJob {
        StoredJob(
            name: job.spec.name.rawValue, options: job.spec.options, paused: job.state == .paused, runs: job.runs,
            addedAt: job.addedWall, lastScheduled: job.lastScheduledWall, anchor: job.anchorWall, ownerUID: job.ownerUID,
            shared: job.shared)
    }

    /// Hands changes to the store (no-op without one). Failures are logged; `durable()` reports them to
    /// the request that waits.
    func persist(_ changes: [StoreChange]) {
        guard let store, !changes.isEmpty else { return }
        let log = self.log
        store.apply(changes) { result in
            if case .failure(let error) = result { log.error("cannot save the state: \(error.message)") }
        }
    }

    /// Stores the job as it is now (if it is durable).
    func persistJob(_ name: JobName) {
        guard let job = jobs[name], isDurable(job) else { return }
        persist([.putJob(storedJob(job))])
    }

    /// Stores a job's last scheduled fire and run count.
    func persistFire(_ name: JobName) {
        guard let job = jobs[name] else { return }
        if isDurable(job) {
            persist([.recordFire(name.rawValue, runs: job.runs, lastScheduled: job.lastScheduledWall)])
        } else if job.origin != .runtime, let last = job.lastScheduledWall {
            persist([.recordConfigJobFire(name.rawValue, lastScheduled: last)])
        }
    }

    /// Stores a finished run in the job's history (pruned to its `history_limit`).
    /// Jobs bound to an owner keep no history: they do not outlive the daemon, and their names may be
    /// reused after a restart.
    func persistRun(_ name: JobName, run: ActiveRun, outcome: RunOutcome) {
        guard let job = jobs[name], job.spec.historyLimit > 0, job.spec.owner == nil else { return }
        persist([.recordRun(StoredRun(
            job: name.rawValue, run: run.id, scheduledAt: run.kind == .manual ? nil : run.scheduledWall,
            startedAt: run.startedWall, endedAt: outcome.finishedWall, result: outcome.result.rawValue,
            exitCode: outcome.exitCode, httpStatus: outcome.httpStatus,
            latenessMs: run.kind == .manual ? nil : Double(run.latenessNs) / 1_000_000, output: outcome.output,
            node: cluster?.node),
            keep: job.spec.historyLimit)])
    }

    /// Returns once every change handed to the store so far is on disk. Called before `OK` to a request
    /// that changed jobs; never on the registry's queue.
    nonisolated func durable() async throws(TimerdError) {
        guard let store else { return }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, StoreError>, Never>) in
            store.apply([]) { continuation.resume(returning: $0) }
        }
        if case .failure(let error) = result {
            throw TimerdError(.internal, "the change is in effect but could not be saved: \(error.message)")
        }
    }

    // MARK: - Restoring after a restart

    /// Brings back the jobs added at run time before the last stop (after the config jobs are loaded),
    /// and applies each job's `misfire` policy to the fires it missed while timerd was not running.
    func restore(_ stored: [StoredJob], configFires: [String: WallTime]) {
        let wallNow = SystemClock.wallNow()
        let monoNow = SystemClock.monoNow()
        // Config jobs: their last fire before the stop tells what they missed.
        for name in Array(jobs.keys) {
            guard var job = jobs[name], job.origin != .runtime else { continue }
            restoreLastRun(&job)
            jobs[name] = job
            let last = configFires[name.rawValue]
            // `at` jobs whose time passed while timerd was down are decided here, fired or not.
            guard last != nil || { if case .at = job.spec.schedule { return true }; return false }() else { continue }
            job.lastScheduledWall = last
            catchUp(&job, wallNow: wallNow, monoNow: monoNow, configJob: true)
            jobs[name] = job
            if job.state == .scheduled { arm(name) }
            runMissed(name)
        }
        var restored = 0
        for item in stored {
            guard let name = try? JobName(item.name) else { continue }
            if jobs[name] != nil {
                log.error(job: item.name, "not restored: a config job now has its name (the stored job is kept; cancel it after renaming the config job)")
                continue
            }
            var job: Job
            do {
                job = try runtimeJob(name, options: item.options, ownerUID: item.ownerUID ?? Client.daemonUID)
            } catch {
                log.error(job: item.name, "not restored: \(error.message)")
                continue
            }
            // A cached cluster job: the leader runs it, and etcd's copy replaces this one once connected.
            job.shared = item.shared && cluster != nil && job.spec.owner == nil
            if item.shared, !job.shared { log.notice(job: item.name, "was a cluster job; without [cluster] it is now this node's own") }
            job.runs = item.runs
            job.nextRunID = item.runs + 1
            job.addedWall = item.addedAt
            job.anchorWall = item.anchor
            job.lastScheduledWall = item.lastScheduled
            catchUp(&job, wallNow: wallNow, monoNow: monoNow, configJob: false, paused: item.paused, runMissed: !job.shared)
            if item.paused, job.state == .scheduled { job.state = .paused }
            restoreLastRun(&job)
            jobs[name] = job
            noteOutputHeld(name)
            restored += 1
            if job.state == .scheduled { arm(name) }
            runMissed(name)
        }
        if !stored.isEmpty { log.notice("restored \(restored) of \(stored.count) job(s) added at run time") }
    }

    /// A runtime job rebuilt from stored options (the state store's, or etcd's), with a fresh id.
    func runtimeJob(_ name: JobName, options: [KeyValue], ownerUID: UInt32) throws(TimerdError) -> Job {
        let spec = try JobSpec(name: name, options: options)
        var job = Job(id: nextJobID, spec: spec, origin: .runtime, ownerUID: ownerUID)
        job.civil = try Self.civilSchedule(for: spec)
        nextJobID += 1
        namesEverUsed.insert(name.rawValue)
        return job
    }

    /// `show`'s last run after a restart: the newest run in the history.
    private func restoreLastRun(_ job: inout Job) {
        guard let store, let last = try? store.history(job: job.spec.name.rawValue, limit: 1).first else { return }
        let result = RunOutcome.Result(rawValue: last.result) ?? .failed
        let duration = max(0, (last.endedAt - last.startedAt).nanoseconds)
        job.lastStarted = (last.run, last.startedAt, Int64((last.latenessMs ?? 0) * 1_000_000))
        job.lastOutcome = (last.run, RunOutcome(
            result: result, exitCode: last.exitCode, signal: nil, httpStatus: last.httpStatus,
            reason: last.exitCode.map { "exited with status \($0)" } ?? last.httpStatus.map { "status \($0)" } ?? last.result,
            output: last.output, finishedWall: last.endedAt, durationNs: UInt64(duration)))
        if result == .ok { job.lastSuccess = last.endedAt }
    }

    /// Sets a job's next fire after a restart and queues the fires it missed in `replays` according to
    /// its `misfire` policy (`runMissed` starts them). Interval jobs keep their phase.
    /// `missedWhile` says when the fires were missed (for the log); with `runMissed` false (a cluster node
    /// that does not lead) the job is only positioned, and what it missed is the leader's business.
    func catchUp(
        _ job: inout Job, wallNow: WallTime, monoNow: UInt64, configJob: Bool, paused: Bool = false,
        missedWhile: String = "while timerd was not running", runMissed: Bool = true
    ) {
        var missed: [WallTime] = []
        var missedTotal = 0
        func add(_ time: WallTime) {
            missedTotal += 1
            missed.append(time)
            if missed.count > Limits.maximumReplays { missed.removeFirst() }
        }
        switch job.spec.schedule {
        case .every(let interval, let start):
            // The grid's fire 0: stored for runtime jobs; for config jobs their last fire is on the grid.
            let anchor = job.anchorWall ?? job.lastScheduledWall
                ?? (configJob ? nil : job.addedWall + (start ?? interval))
            guard let anchor else { return }
            let period = max(1, interval.nanoseconds)
            func index(atOrBefore time: WallTime) -> Int64 {
                let offset = (time - anchor).nanoseconds
                return offset < 0 ? -1 : offset / period
            }
            let firstUnfired = job.lastScheduledWall.map { index(atOrBefore: $0) + 1 } ?? 0
            let lastDue = index(atOrBefore: wallNow)
            if lastDue >= firstUnfired {
                var k = max(firstUnfired, lastDue - Int64(Limits.maximumReplays) + 1)
                while k <= lastDue { add(anchor + .nanoseconds(k * period)); k += 1 }
                missedTotal = Int(lastDue - firstUnfired + 1)
            }
            let next = anchor + .nanoseconds((lastDue + 1) * period)
            let grid = FireGrid(first: monoNow &+ UInt64(max(0, (next - wallNow).nanoseconds)), interval: interval)
            job.grid = grid
            job.nextIndex = 0
            job.nextMono = grid.first &+ UInt64(jitterNanoseconds(job))
            job.anchorWall = anchor
        case .after(let delay):
            if configJob { return }
            let due = job.addedWall + delay
            if job.lastScheduledWall != nil {
                job.state = .finished
            } else if due <= wallNow {
                add(due)
                job.state = .finished
            } else {
                job.nextMono = monoNow &+ UInt64((due - wallNow).nanoseconds) &+ UInt64(jitterNanoseconds(job))
            }
        case .at(let time):
            if let last = job.lastScheduledWall, last >= time {
                job.state = .finished
            } else if time <= wallNow {
                add(time)
                job.state = .finished
            } else {
                job.nextWall = time + .nanoseconds(jitterNanoseconds(job))
            }
        case .cron, .calendar:
            guard let civil = job.civil else { return }
            var cursor = job.lastScheduledWall ?? job.addedWall
            var count = 0
            while let next = civil.next(after: cursor), next <= wallNow, count < 100_000 {
                add(next)
                cursor = next
                count += 1
            }
            job.civilBase = wallNow
            if !scheduleNextCivilFire(&job), missed.isEmpty { job.state = .finished }
        }
        guard !missed.isEmpty, runMissed else { return }
        // A fire still within the grace runs as a late fire whatever the policy; older ones follow it.
        let grace = job.spec.misfireGrace
        let recent = missed.filter { wallNow - $0 <= grace }
        let lost = missedTotal - recent.count
        var run: [WallTime]
        switch job.spec.misfire {
        case .skip: run = recent.suffix(1).map { $0 }
        case .once: run = [missed.last!]
        case .all: run = missed
        }
        // A paused job runs nothing; what it missed is skipped, as while it is paused.
        if paused { run = [] }
        let skipped = missedTotal - run.count
        job.replays = run
        if let last = missed.last { job.lastScheduledWall = max(job.lastScheduledWall ?? last, last) }
        let name = job.spec.name
        let policy = job.spec.misfire
        let message = "missed \(missedTotal) fire(s) \(missedWhile) (\(lost) beyond misfire_grace=\(DurationText.format(grace))); misfire=\(policy): "
            + (run.isEmpty ? (paused ? "none run (paused)" : "none run") : "running \(run.count) now")
            + (skipped > 0 ? ", \(skipped) skipped" : "")
        log.notice(job: name.rawValue, message)
        if skipped > 0 {
            job.skipped += skipped
            job.lastSkip = (wallNow, "missed \(missedWhile) (misfire=\(policy))")
            skippedTotal += skipped
        }
    }

    /// Starts the next missed fire queued by `catchUp` once the job has nothing running; called again when
    /// each of its runs ends.
    func runMissed(_ name: JobName) {
        guard var job = jobs[name], !job.replays.isEmpty, job.active.isEmpty, job.waitingForSlot == 0,
              !shuttingDown else { return }
        let due = job.replays.removeFirst()
        jobs[name] = job
        let late = max(0, (SystemClock.wallNow() - due).nanoseconds)
        emit("fired", job: name, scheduledAt: due, latenessNs: late)
        fire(name, scheduledMono: SystemClock.monoNow() &- UInt64(late), scheduledWall: due, kind: .scheduled)
        persistFire(name)
    }
}
