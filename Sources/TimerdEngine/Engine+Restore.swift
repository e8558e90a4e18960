import TimerdCore

/// After a restart (or a takeover in the cluster): where each job's schedule goes on, and what its
/// `misfire` policy does with the fires it missed.
extension Engine {
    /// Brings back the runtime jobs kept before the last stop (after the config jobs are loaded), and
    /// applies each job's `misfire` policy to the fires it missed while timerd was not running.
    mutating func restore(_ state: RestoredState) {
        // Config jobs: their last fire before the stop tells what they missed.
        for name in jobs.keys.sorted() {
            guard let job = jobs[name], job.origin != .runtime else { continue }
            if let last = state.lastRuns[name] { restoreLastRun(job, last) }
            job.fireSequence = max(job.fireSequence, state.fireSequences[name] ?? 0)
            let last = state.configFires[name]
            // `at` jobs whose time passed while timerd was down are decided here, fired or not.
            guard last != nil || { if case .at = job.spec.schedule { return true }; return false }() else { continue }
            job.lastScheduledWall = last
            // Its grid is the one its last fire was on, not the one this start-up drew from now.
            if case .every = job.spec.schedule { job.anchorWall = nil }
            catchUp(job, configJob: true)
            if job.state == .scheduled { arm(job) }
            runMissed(job)
        }
        var restored = 0
        for item in state.jobs {
            let name = item.stored.name
            if jobs[name] != nil {
                log(.error, name, "not restored: a config job now has its name (the stored job is kept; cancel it after renaming the config job)")
                continue
            }
            let job = EngineJob(id: nextJobID, spec: item.spec, origin: .runtime, ownerUID: item.stored.ownerUID)
            nextJobID += 1
            noteNameUsed(name)
            job.civil = item.civil
            // A cached cluster job: its owner runs it, and etcd's copy replaces this one once connected.
            job.shared = item.stored.shared && settings.clusterNode != nil && job.spec.owner == nil
            if item.stored.shared, !job.shared { log(.notice, name, "was a cluster job; without [cluster] it is now this node's own") }
            job.runs = item.stored.runs
            job.nextRunID = item.stored.runs + 1
            job.addedWall = item.stored.addedAt
            job.anchorWall = item.stored.anchor
            job.lastScheduledWall = item.stored.lastScheduled
            job.fireSequence = state.fireSequences[name] ?? 0
            catchUp(job, configJob: false, paused: item.stored.paused, runMissed: !job.shared)
            if item.stored.paused, job.state == .scheduled { job.state = .paused }
            if let last = state.lastRuns[name] { restoreLastRun(job, last) }
            jobs[name] = job
            restored += 1
            if job.state == .scheduled { arm(job) }
            runMissed(job)
        }
        if !state.jobs.isEmpty { log(.notice, "restored \(restored) of \(state.jobs.count.counted("job")) added at run time") }
    }

    /// `show`'s last run after a restart: the newest run in the history.
    private func restoreLastRun(_ job: EngineJob, _ last: FinishedRun) {
        job.lastStarted = (last.run, last.startedAt, last.lateness)
        job.lastOutcome = (last.run, last.outcome)
        if last.outcome.result == .ok { job.lastSuccess = last.outcome.finishedWall }
    }

    /// Sets a job's next fire after a restart and queues the fires it missed in `replays` according to
    /// its `misfire` policy (`runMissed` starts them). Interval jobs keep their phase. `missedWhile` says
    /// when the fires were missed (for the log); with `runMissed` false (a shared job another
    /// cluster node runs) the job is only positioned.
    mutating func catchUp(
        _ job: EngineJob, configJob: Bool, paused: Bool = false,
        missedWhile: String = "while timerd was not running", runMissed: Bool = true
    ) {
        let wallNow = now.wall
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
            // The last fire is a grid time converted between the clocks, which can land a hair before
            // the grid point it was: the nearest grid point is the one that fired.
            func index(nearest time: WallTime) -> Int64 {
                let offset = (time - anchor).nanoseconds
                return offset < -period / 2 ? -1 : (offset + period / 2) / period
            }
            let firstUnfired = job.lastScheduledWall.map { index(nearest: $0) + 1 } ?? 0
            let lastDue = index(atOrBefore: wallNow)
            if lastDue >= firstUnfired {
                var k = max(firstUnfired, lastDue - Int64(Limits.maximumReplays) + 1)
                while k <= lastDue { add(anchor + .nanoseconds(k * period)); k += 1 }
                missedTotal = Int(lastDue - firstUnfired + 1)
            }
            let next = anchor + .nanoseconds((lastDue + 1) * period)
            let grid = FireGrid(first: now.mono + max(.zero, next - wallNow), interval: interval)
            job.grid = grid
            job.nextIndex = 0
            job.nextMono = grid.first + jitter(for: job)
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
                job.nextMono = now.mono + (due - wallNow) + jitter(for: job)
            }
        case .at(let time):
            if let last = job.lastScheduledWall, last >= time {
                job.state = .finished
            } else if time <= wallNow {
                add(time)
                job.state = .finished
            } else {
                job.nextWall = time + jitter(for: job)
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
            if !scheduleNextCivilFire(job), missed.isEmpty { job.state = .finished }
        case .triggered:
            return  // nothing of its own to miss
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
        let message = "missed \(missedTotal.counted("fire")) \(missedWhile) (\(lost) beyond misfire_grace=\(DurationText.format(grace))); misfire=\(policy): "
            + (run.isEmpty ? (paused ? "none run (paused)" : "none run") : "running \(run.count) now")
            + (skipped > 0 ? ", \(skipped) skipped" : "")
        log(.notice, name, message)
        if skipped > 0 {
            let reason = "missed \(missedWhile) (misfire=\(policy))"
            countNotRun(job, skipped, reason: reason)
            // Each missed fire that does not run, for `simulate` and `why` (the newest ones, up to the
            // replay limit, as the log says how many there were in all).
            let notRun = missed.filter { !run.contains($0) }
            decide(.missed(name, scheduled: notRun.first ?? missed.first, count: skipped, reason: reason))
            for time in notRun.suffix(settings.fireRecordsKept) {
                record(job, FireRecord(job: name, sequence: nextFireSequence(job), scheduled: time, outcome: .missed,
                                       reason: reason))
            }
        }
    }
}
