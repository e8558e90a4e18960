import TimerdCore

/// Where each job's schedule stands, when it is due next, and what happens when a deadline is reached or
/// the wall clock is set.
extension Engine {
    // MARK: - Position

    /// Sets the first fire of a freshly added (or re-declared) job, counting from now. Jitter is added to
    /// every kind of schedule.
    mutating func startSchedule(_ job: EngineJob) {
        job.nextMono = nil
        job.nextWall = nil
        job.nextNominal = nil
        job.civilBase = nil
        job.grid = nil
        let jitter = jitter(for: job)
        switch job.spec.schedule {
        case .every(let interval, let start):
            let grid = FireGrid(first: now.mono + (start ?? interval), interval: interval)
            job.grid = grid
            job.nextIndex = 0
            job.nextMono = grid.first + jitter
        case .after(let delay):
            job.nextMono = now.mono + delay + jitter
        case .at(let time):
            job.nextWall = time + jitter
        case .cron(let expression) where expression.isReboot:
            // Once when the daemon starts: config jobs loaded at start-up fire now; later (a reload, or
            // added at run time) they wait for the next start.
            if !initialConfigApplied, case .config = job.origin {
                job.nextMono = now.mono + jitter
            } else {
                job.state = .finished
            }
        case .cron, .calendar:
            job.civilBase = now.wall
            scheduleNextCivilFire(job)
        case .triggered:
            break  // no deadline: it fires when its upstream's run ends
        }
    }

    /// How long after its scheduled time this fire of `job` starts (`jitter=`): random in [0, jitter]
    /// from the engine's seeded generator, or the same for every fire with `fixed_jitter=yes`.
    mutating func jitter(for job: EngineJob) -> Duration {
        let limit = job.spec.jitter.nanoseconds
        guard limit > 0 else { return .zero }
        if job.spec.fixedJitter {
            return Jitter.fixed(machineID: settings.machineID, name: job.spec.name.rawValue, limit: job.spec.jitter)
        }
        return .nanoseconds(Int64.random(in: 0...limit, using: &random))
    }

    /// Sets a cron or calendar job's next fire: the first scheduled time after its base. Returns false
    /// when the schedule has no more fires.
    @discardableResult
    mutating func scheduleNextCivilFire(_ job: EngineJob) -> Bool {
        guard let civil = job.civil, let base = job.civilBase else { return false }
        guard let next = civil.next(after: base) else {
            job.nextNominal = nil
            job.nextWall = nil
            return false
        }
        job.nextNominal = next
        job.nextWall = next + jitter(for: job)
        return true
    }

    /// A cron or calendar job's deadline was reached at `wallNow`: the scheduled time it fires for (the
    /// latest one due, when the daemon was stopped or the clock jumped over several), how many were
    /// missed, and the next fire set on the job.
    mutating func advanceCivil(_ job: EngineJob) -> (due: WallTime, missed: Int) {
        let wallNow = now.wall
        guard let civil = job.civil, var due = job.nextNominal else { return (wallNow, 0) }
        var missed = 0
        var following = civil.next(after: due)
        // A bounded count: after a jump of years over a per-second schedule, start again from now.
        while let next = following, next <= wallNow {
            missed += 1
            due = next
            if missed == 10_000 {
                following = civil.next(after: wallNow)
                break
            }
            following = civil.next(after: next)
        }
        job.civilBase = due
        job.nextNominal = following
        job.nextWall = following.map { $0 + jitter(for: job) }
        return (due, missed)
    }

    /// Moves a resumed job to its next fire on its original schedule. Returns how many fires fell due
    /// while it was paused (they are skipped).
    mutating func resumeOnSchedule(_ job: EngineJob) -> Int {
        if job.civil != nil {
            guard job.nextMono == nil, let due = job.nextNominal, due <= now.wall else { return 0 }
            let (_, missed) = advanceCivil(job)
            return missed + 1
        }
        guard let grid = job.grid else { return 0 }
        let next = grid.index(after: now.mono)
        let missed = next > job.nextIndex ? Int(next - job.nextIndex) : 0
        job.nextIndex = max(job.nextIndex, next)
        job.nextMono = grid.instant(job.nextIndex) + jitter(for: job)
        return missed
    }

    // MARK: - Deadlines

    /// Asks for the job's timer at its next deadline. Paused and finished jobs have none; shared jobs
    /// only on the member that runs them.
    mutating func arm(_ job: EngineJob) {
        let name = job.name
        // Stopping: nothing fires any more (a change saved while the stop began still takes effect).
        guard !shuttingDown, let deadline = deadline(of: job) else { return }
        if job.shared, !runsHere(job) { return }
        out.append(.arm(name, jobID: job.id, deadline, leeway: job.spec.leeway))
    }

    /// The job's next deadline: its schedule's, or its pending retry's when that comes first (a retry is
    /// due on the monotonic clock; a wall-clock deadline is compared as it stands now).
    func deadline(of job: EngineJob) -> Deadline? {
        let scheduled = job.deadline
        guard let retry = job.pendingRetry?.due else { return scheduled }
        switch scheduled {
        case nil: return .mono(retry)
        case .mono(let instant): return .mono(min(instant, retry))
        case .wall(let time): return retry < now.mono + (time - now.wall) ? .mono(retry) : scheduled
        }
    }

    mutating func disarm(_ job: EngineJob) {
        out.append(.disarm(job.spec.name, jobID: job.id))
    }

    /// A job's deadline was reached: fire it, advance its schedule, re-arm or finish.
    mutating func deadlineReached(_ name: JobName, jobID: UInt64) {
        let slack = Duration.milliseconds(1)
        // A failed run's next attempt (`retries`), which a one-shot, finished after its fire, has too.
        if let job = jobs[name], job.id == jobID, let retry = job.pendingRetry, job.state != .paused, !isCancelPending(job),
           now.mono + slack >= retry.due {
            job.pendingRetry = nil
            fire(job, retry.fire)
            // The schedule's own deadline, if it is due too, comes with the next timer event (at once).
            arm(job)
            noteIfIdleAndFinished(job)
            return
        }
        guard let job = jobs[name], job.id == jobID, job.state == .scheduled, !isCancelPending(job) else { return }
        if job.shared, !runsHere(job) { return }
        var scheduled = now.mono
        var scheduledWall: WallTime?
        if let deadline = job.nextMono {
            // A re-armed timer can still deliver an event for its old deadline: ignore anything early.
            guard now.mono + slack >= deadline else { return arm(job) }
            scheduled = deadline
        } else if let wall = job.nextWall {
            guard now.wall + slack >= wall else { return arm(job) }
            scheduled = now.mono - max(.zero, now.wall - wall)
            scheduledWall = wall
        }

        /// A grid job's fire as the grid has it (no jitter): what a restart counts missed fires from.
        var nominal: WallTime?
        if let grid = job.grid {
            // If the daemon was stopped or starved past more than one fire, run once for the latest one
            // and say how many were missed, instead of firing a burst.
            let latest = grid.index(atOrBefore: now.mono) ?? job.nextIndex
            if latest > job.nextIndex {
                let missed = Int(latest - job.nextIndex)
                noteMissed(job, count: missed, scheduled: now.wall(of: grid.instant(job.nextIndex)),
                           reason: "missed: the daemon could not fire on time (it was stopped or starved)")
                scheduled = grid.instant(latest)
            }
            let fired = max(job.nextIndex, latest)
            nominal = now.wall(of: grid.instant(fired))
            job.nextIndex = fired + 1
            job.nextMono = grid.instant(job.nextIndex) + jitter(for: job)
        } else if job.civil != nil {
            if job.nextMono != nil {
                // A fire set by RESUME after=DUR: the calendar schedule continues from now.
                job.nextMono = nil
                job.civilBase = now.wall
                scheduleNextCivilFire(job)
            } else {
                let jitter = (scheduledWall ?? now.wall) - (job.nextNominal ?? now.wall)
                let firstMissed = job.nextNominal
                let (due, missed) = advanceCivil(job)
                if missed > 0 {
                    noteMissed(job, count: missed, scheduled: firstMissed,
                               reason: "missed: the daemon could not fire on time (it was stopped or starved, or the clock jumped)")
                    scheduledWall = due + jitter
                    scheduled = now.mono - max(.zero, now.wall - scheduledWall!)
                }
            }
        } else {
            job.nextMono = nil
            job.nextWall = nil
        }
        let late = now.mono - scheduled
        let wall = scheduledWall ?? now.wall(of: scheduled)
        // The nominal time (no jitter) is what a restart counts missed fires from.
        job.lastScheduledWall = job.civil != nil ? (job.civilBase ?? wall) : (nominal ?? wall)
        decide(.fired(name, scheduled: wall, lateness: late, byTimer: true))
        if late > job.spec.misfireGrace, job.spec.misfire == .skip {
            let sequence = nextFireSequence(job)
            noteSkip(job, count: 1, scheduled: wall, sequence: sequence,
                     reason: "handled \(DurationText.format(late)) late, beyond misfire_grace=\(DurationText.format(job.spec.misfireGrace)) (misfire=skip)")
        } else {
            fire(job, PendingFire(kind: .scheduled, scheduled: scheduled, scheduledWall: wall, sequence: nextFireSequence(job)))
        }
        persistFire(job)
        continueSchedule(job)
    }

    /// After a scheduled fire: re-arm for the next one, or finish a one-shot, a job whose `count` is
    /// reached, or a calendar job with no more fires.
    mutating func continueSchedule(_ job: EngineJob) {
        guard jobs[job.name] === job else { return }
        let name = job.name
        let oneShot = !job.spec.schedule.repeats
        let exhausted = job.civil != nil && job.nextWall == nil && job.nextMono == nil
        if oneShot || exhausted || (job.spec.count.map { job.acceptedFires >= $0 } ?? false) {
            job.state = .finished
            job.nextMono = nil
            job.nextWall = nil
            disarm(job)
            let why = oneShot ? "one-shot" : exhausted ? "the calendar has no later time" : "count=\(job.spec.count!) reached"
            log(.info, name, "finished its schedule (\(why))")
            noteIfIdleAndFinished(job)
        } else {
            arm(job)
        }
    }

    // MARK: - The wall clock

    /// The wall clock was set: every wall-clock job is re-armed at once for its new next fire. A cron or
    /// calendar job whose base (its last scheduled fire) is now in the future counts again from now, so
    /// times that come round again fire again, as systemd does. Interval jobs are not touched.
    mutating func wallClockSet(reason: String) {
        var rearmed: [JobName] = []
        for (name, job) in jobs where job.state == .scheduled && (job.civil != nil || job.nextWall != nil) {
            rearmed.append(name)
        }
        rearmed.sort()
        for name in rearmed {
            guard let job = jobs[name] else { continue }
            if job.civil != nil, job.nextMono == nil {
                if let base = job.civilBase, base > now.wall { job.civilBase = now.wall }
                scheduleNextCivilFire(job)
            }
            arm(job)
        }
        let wall = now.wall
        log(.notice, "the wall clock was set (\(reason)); now \(RFC3339.format(wall)); re-armed \(rearmed.count.counted("calendar job"))")
        decide(.clockSet(reason: reason, now: now.wall))
    }

    /// New zone rules for calendar jobs: re-arm those that are scheduled on their calendar.
    mutating func zonesChanged(_ schedules: [JobName: CivilSchedule]) {
        var changed = 0
        for (name, civil) in schedules.sorted(by: { $0.key < $1.key }) {
            guard let job = jobs[name], job.civil != nil, job.civil != civil else { continue }
            changed += 1
            job.civil = civil
            if job.state == .scheduled, job.nextMono == nil {
                scheduleNextCivilFire(job)
                arm(job)
            } else {
            }
        }
        if changed > 0 { log(.notice, "time zone rules changed for \(changed.counted("calendar job")); re-armed") }
    }

    /// A shared job's next fire as a node that does not run it sees it: the schedule's next time after now.
    func scheduleNextFire(_ job: EngineJob, at now: Instant) -> WallTime? {
        switch job.spec.schedule {
        case .every(let interval, _):
            guard let anchor = job.anchorWall else { return nil }
            guard now.wall >= anchor else { return anchor }
            let period = max(1, interval.nanoseconds)
            return anchor + .nanoseconds(((now.wall - anchor).nanoseconds / period + 1) * period)
        case .cron, .calendar:
            return job.civil?.next(after: now.wall)
        case .after, .at, .triggered:
            return job.nextWall ?? job.nextMono.map { now.wall(of: $0) }
        }
    }
}
