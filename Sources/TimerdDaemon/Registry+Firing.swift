import Dispatch
import TimerdCore
import TimerdSystem

extension Registry {
    // MARK: - Schedule position

    /// Sets the first fire of a freshly added (or re-declared) job, counting from `now`. Jitter is added
    /// to every kind of schedule.
    func startSchedule(_ job: inout Job, from now: UInt64) {
        job.nextMono = nil
        job.nextWall = nil
        job.nextNominal = nil
        job.civilBase = nil
        job.grid = nil
        let jitter = UInt64(jitterNanoseconds(job))
        switch job.spec.schedule {
        case .every(let interval, let start):
            let grid = FireGrid(first: now &+ UInt64((start ?? interval).nanoseconds), interval: interval)
            job.grid = grid
            job.nextIndex = 0
            job.nextMono = grid.first &+ jitter
        case .after(let delay):
            job.nextMono = now &+ UInt64(delay.nanoseconds) &+ jitter
        case .at(let time):
            job.nextWall = time + .nanoseconds(Int64(jitter))
        case .cron(let expression) where expression.isReboot:
            // Once when the daemon starts: config jobs loaded at start-up fire now; later (a reload, or
            // added at run time) they wait for the next start.
            if !initialConfigApplied, case .config = job.origin {
                job.nextMono = now &+ jitter
            } else {
                job.state = .finished
            }
        case .cron, .calendar:
            job.civilBase = SystemClock.wallNow()
            scheduleNextCivilFire(&job)
        }
    }

    /// Moves a resumed job to its next fire on its original schedule. Returns how many fires fell due
    /// while it was paused (they are skipped; a one-shot whose time passed fires at once instead).
    func resumeOnSchedule(_ job: inout Job, now: UInt64) -> Int {
        if job.civil != nil {
            let wallNow = SystemClock.wallNow()
            guard job.nextMono == nil, let due = job.nextNominal, due <= wallNow else { return 0 }
            let (_, missed) = advanceCivil(&job, wallNow: wallNow)
            return missed + 1
        }
        guard let grid = job.grid else { return 0 }
        let next = grid.index(after: now)
        let missed = next > job.nextIndex ? Int(next - job.nextIndex) : 0
        job.nextIndex = max(job.nextIndex, next)
        job.nextMono = grid.instant(job.nextIndex) &+ UInt64(jitterNanoseconds(job))
        return missed
    }

    // MARK: - Timers

    /// Arms (or re-arms) the job's timer for its next deadline. Paused and finished jobs have no timer.
    func arm(_ name: JobName) {
        noteStatusChange()
        guard var job = jobs[name], job.state == .scheduled else { return }
        // Only the cluster's leader runs shared jobs; other nodes keep them unarmed (Registry+Cluster).
        if job.shared, clusterRole != .leader { return }
        if job.timer == nil {
            let timer = DispatchSource.makeTimerSource(flags: job.spec.leeway == .zero ? .strict : [], queue: queue)
            let jobID = job.id
            timer.setEventHandler { [unowned self] in
                self.assumeIsolated { $0.timerFired(name, jobID: jobID) }
            }
            timer.activate()
            job.timer = timer
        }
        let leeway = DispatchTimeInterval.nanoseconds(Int(job.spec.leeway.nanoseconds))
        if let deadline = job.nextMono {
            job.timer!.schedule(deadline: DispatchTime(uptimeNanoseconds: deadline), repeating: .never, leeway: leeway)
        } else if let wall = job.nextWall {
            let delay = max(0, (wall - SystemClock.wallNow()).nanoseconds)
            job.timer!.schedule(wallDeadline: .now() + .nanoseconds(Int(delay)), repeating: .never, leeway: leeway)
        }
        jobs[name] = job
    }

    /// Stops and forgets the job's timer.
    func disarm(_ job: inout Job) {
        noteStatusChange()
        job.timer?.cancel()
        job.timer = nil
    }

    /// A job's timer went off: fire it, advance its schedule, re-arm or finish.
    func timerFired(_ name: JobName, jobID: UInt64) {
        guard var job = jobs[name], job.id == jobID, job.state == .scheduled else { return }
        let now = SystemClock.monoNow()
        let slack: UInt64 = 1_000_000
        var scheduled = now
        var scheduledWall: WallTime?
        if let deadline = job.nextMono {
            // A re-armed source can still deliver an event for its old deadline: ignore anything early.
            guard now &+ slack >= deadline else { return arm(name) }
            scheduled = deadline
        } else if let wall = job.nextWall {
            let wallNow = SystemClock.wallNow()
            guard wallNow + .nanoseconds(Int64(slack)) >= wall else { return arm(name) }
            scheduled = now &- UInt64(max(0, (wallNow - wall).nanoseconds))
            scheduledWall = wall
        }

        if let grid = job.grid {
            // If the daemon was stopped or starved past more than one fire, run once for the latest one and
            // say how many were missed, instead of firing a burst.
            let latest = grid.index(atOrBefore: now) ?? job.nextIndex
            if latest > job.nextIndex {
                let missed = Int(latest - job.nextIndex)
                noteSkip(name, count: missed, reason: "missed: the daemon could not fire on time (it was stopped or starved)")
                job = jobs[name]!
                scheduled = grid.instant(latest)
            }
            job.nextIndex = max(job.nextIndex, latest) + 1
            job.nextMono = grid.instant(job.nextIndex) &+ UInt64(jitterNanoseconds(job))
        } else if job.civil != nil {
            let wallNow = SystemClock.wallNow()
            if job.nextMono != nil {
                // A fire set by RESUME after=DUR: the calendar schedule continues from now.
                job.nextMono = nil
                job.civilBase = wallNow
                scheduleNextCivilFire(&job)
            } else {
                let jitter = (scheduledWall ?? wallNow) - (job.nextNominal ?? wallNow)
                let (due, missed) = advanceCivil(&job, wallNow: wallNow)
                if missed > 0 {
                    jobs[name] = job
                    noteSkip(name, count: missed, reason: "missed: the daemon could not fire on time (it was stopped or starved, or the clock jumped)")
                    job = jobs[name]!
                    scheduledWall = due + jitter
                    scheduled = now &- UInt64(max(0, (wallNow - scheduledWall!).nanoseconds))
                }
            }
        } else {
            job.nextMono = nil
            job.nextWall = nil
        }
        let late = Int64(bitPattern: now &- scheduled)
        let wall = scheduledWall ?? wallTime(ofMono: scheduled)
        // The nominal time (no jitter) is what a restart counts missed fires from.
        job.lastScheduledWall = job.civil != nil ? (job.civilBase ?? wall) : wall
        jobs[name] = job
        lateness.record(late, at: now)
        latenessHistogram.record(seconds: Double(late) / 1e9)
        emit("fired", job: name, scheduledAt: wall, latenessNs: late)
        if late > job.spec.misfireGrace.nanoseconds, job.spec.misfire == .skip {
            noteSkip(name, count: 1, reason: "handled \(DurationText.format(.nanoseconds(late))) late, beyond misfire_grace=\(DurationText.format(job.spec.misfireGrace)) (misfire=skip)")
        } else {
            fire(name, scheduledMono: scheduled, scheduledWall: wall, kind: .scheduled)
        }
        persistFire(name)
        continueSchedule(name)
    }

    /// After a scheduled fire: re-arm for the next one, or finish a one-shot, a job whose `count` is
    /// reached, or a calendar job with no more fires.
    func continueSchedule(_ name: JobName) {
        guard var job = jobs[name] else { return }
        let oneShot = !job.spec.schedule.repeats
        let exhausted = job.civil != nil && job.nextWall == nil && job.nextMono == nil
        if oneShot || exhausted || (job.spec.count.map { job.acceptedFires >= $0 } ?? false) {
            job.state = .finished
            job.nextMono = nil
            job.nextWall = nil
            disarm(&job)
            jobs[name] = job
            let why = oneShot ? "one-shot" : exhausted ? "the calendar has no later time" : "count=\(job.spec.count!) reached"
            log.info(job: name.rawValue, "finished its schedule (\(why))")
            noteIfIdleAndFinished(name)
        } else {
            arm(name)
        }
    }

    /// Queues a finished runtime job with nothing in flight for pruning (see `pruneFinishedRuntimeJobs`).
    func noteIfIdleAndFinished(_ name: JobName) {
        guard let job = jobs[name], job.origin == .runtime, job.state == .finished, job.active.isEmpty,
              job.queued == nil, job.waitingForSlot == 0, job.heldFire == nil, job.replays.isEmpty else { return }
        finishedRuntimeJobs.append((name, job.id))
        pruneFinishedRuntimeJobs()
    }

    // MARK: - Firing and runs

    /// Handles one fire of a job by its overlap policy and the daemon's run cap. Returns what happened:
    /// `started`, `queued`, `waiting` (for a run slot) or `skipped`.
    @discardableResult
    func fire(
        _ name: JobName, scheduledMono: UInt64, scheduledWall: WallTime? = nil, kind: FireKind, claimed: Bool = false
    ) -> String {
        guard var job = jobs[name] else { return "skipped" }
        let pending = PendingFire(kind: kind, scheduledMono: scheduledMono, scheduledWall: scheduledWall ?? wallTime(ofMono: scheduledMono))
        if kind == .scheduled, !Mode.includes(job.spec.modes, currentMode) {
            return hold(name, pending)
        }
        // A shared job's scheduled fire runs only once this node has won it in etcd (Registry+Cluster).
        if kind == .scheduled, job.shared, !claimed {
            return claimThenFire(name, pending)
        }
        if kind == .scheduled, !takeRunToken(job) {
            noteSkip(name, count: 1, reason: "uid \(job.ownerUID)'s jobs started \(access.settings.userMaxRunsPerMinute) runs in the last minute (user_max_runs_per_minute)")
            return "skipped"
        }
        let busy = !job.active.isEmpty || job.waitingForSlot > 0
        if busy {
            let holder = job.active.first.map { "run \($0.id) is still going" } ?? "the previous fire is still waiting for a run slot"
            switch job.spec.overlap {
            case .skip:
                noteSkip(name, count: 1, reason: "\(holder) (overlap=skip)")
                return "skipped"
            case .queue, .replace:
                if job.queued != nil {
                    noteSkip(name, count: 1, reason: "\(holder) and a fire is already queued (overlap=\(job.spec.overlap))")
                    return "skipped"
                }
                job.queued = pending
                if kind == .scheduled { job.acceptedFires += 1 }
                jobs[name] = job
                if job.spec.overlap == .replace {
                    log.info(job: name.rawValue, "\(holder); stopping it to start anew (overlap=replace)")
                    for run in job.active { run.handle?.stop(reason: "replaced by a new fire (overlap=replace)") }
                } else {
                    log.info(job: name.rawValue, "\(holder); fire queued (overlap=queue)")
                }
                return "queued"
            case .allow:
                break
            }
        }
        if kind == .scheduled { job.acceptedFires += 1 }
        jobs[name] = job
        return startOrWait(name, pending)
    }

    /// Starts a run now, or parks it until a run slot frees up (`max_running`).
    func startOrWait(_ name: JobName, _ pending: PendingFire) -> String {
        guard runningTotal >= maxRunning else {
            startRun(name, pending)
            return "started"
        }
        guard var job = jobs[name] else { return "skipped" }
        job.waitingForSlot += 1
        jobs[name] = job
        waiting.append((name, job.id, pending))
        log.notice(job: name.rawValue, "fire waits for a run slot (max_running=\(maxRunning) runs already going)")
        return "waiting"
    }

    private func startRun(_ name: JobName, _ pending: PendingFire) {
        guard var job = jobs[name] else { return }
        let runID = job.nextRunID
        job.nextRunID += 1
        job.runs += 1
        let now = SystemClock.monoNow()
        let startedWall = SystemClock.wallNow()
        let lateness = Int64(bitPattern: now &- pending.scheduledMono)
        var request = RunRequest(
            job: name.rawValue, runID: runID, action: job.spec.action,
            environment: [:], workingDirectory: job.spec.cwd ?? "/", timeout: job.spec.timeout, killGrace: job.spec.killGrace)
        if case .webhook(let hook) = job.spec.action {
            request.webhookBody = Self.webhookBody(hook, spec: job.spec, runID: runID, scheduled: pending.scheduledWall, fired: startedWall)
        } else {
            request.runAs = runAs(job)
            request.environment = environment(for: job.spec, runID: runID, scheduled: pending.scheduledWall, runAs: request.runAs)
        }
        let jobID = job.id
        let handle = launcher.start(request) { [unowned self] event in
            self.enqueue { $0.runEvent(name, jobID: jobID, runID: runID, event: event) }
        }
        job.active.append(ActiveRun(id: runID, handle: handle, startedMono: now, startedWall: startedWall, kind: pending.kind,
                                    scheduledWall: pending.scheduledWall, latenessNs: lateness))
        job.lastStarted = (runID, startedWall, lateness)
        jobs[name] = job
        runningTotal += 1
        noteStatusChange()
        let late = lateness > 1_000_000 ? ", \(DurationText.format(.milliseconds(lateness / 1_000_000))) late" : ""
        log.info(job: name.rawValue, run: runID,
                 "starting (\(pending.kind == .manual ? "by hand" : "scheduled at \(RFC3339.format(pending.scheduledWall))")\(late))")
    }

    /// A launcher's report about a run.
    func runEvent(_ name: JobName, jobID: UInt64, runID: Int, event: RunEvent) {
        switch event {
        case .started(let pid):
            log.debug(job: name.rawValue, run: runID, pid.map { "started, pid \($0)" } ?? "request started")
            emit("started", job: name, run: runID)
            if let run = jobs[name]?.active.first(where: { $0.id == runID }), jobs[name]?.id == jobID {
                let now = SystemClock.monoNow()
                execLatency.record(Int64(bitPattern: now &- run.startedMono), at: now)
            }
        case .finished(let outcome):
            runningTotal -= 1
            runsByResult[outcome.result, default: 0] += 1
            noteStatusChange()
            let summary = "\(outcome.result.rawValue): \(outcome.reason) after \(DurationText.format(.milliseconds(Int64(outcome.durationNs / 1_000_000))))"
            if var job = jobs[name], job.id == jobID {
                let finished = job.active.first { $0.id == runID }
                job.active.removeAll { $0.id == runID }
                let previous = job.lastOutcome?.outcome.result
                if let finished {
                    persistRun(name, run: finished, outcome: outcome)
                    if job.shared { publishRun(name, run: finished, outcome: outcome) }
                }
                job.lastOutcome = (runID, outcome)
                job.runsByResult[outcome.result, default: 0] += 1
                if outcome.result == .ok { job.lastSuccess = outcome.finishedWall }
                jobs[name] = job
                noteOutputHeld(name)
                emit("finished", job: name, run: runID, result: outcome.result.rawValue, exitCode: outcome.exitCode,
                     httpStatus: outcome.httpStatus, reason: outcome.reason)
                log.log(outcome.result == .ok ? .info : .warning, job: name.rawValue, run: runID,
                        exitStatus: outcome.exitStatusField, summary)
                notifyTransition(job.spec, runAs: runAs(job), runID: runID, outcome: outcome, previous: previous)
                if job.active.isEmpty, let queued = job.queued {
                    job.queued = nil
                    jobs[name] = job
                    if !shuttingDown { _ = startOrWait(name, queued) }
                }
                runMissed(name)
                noteIfIdleAndFinished(name)
            } else {
                orphanHandles["\(jobID)/\(runID)"] = nil
                log.info(job: name.rawValue, run: runID, "run of a removed job ended: \(summary)")
            }
            startWaitingRuns()
            if shuttingDown, runningTotal == 0 {
                let waiters = drainWaiters
                drainWaiters = []
                for waiter in waiters { waiter.resume() }
            }
        }
    }

    /// Starts parked fires while there are free run slots, oldest first.
    func startWaitingRuns() {
        while runningTotal < maxRunning, !waiting.isEmpty, !shuttingDown {
            let next = waiting.removeFirst()
            guard var job = jobs[next.name], job.id == next.jobID else { continue }
            job.waitingForSlot -= 1
            jobs[next.name] = job
            startRun(next.name, next.fire)
        }
    }

    /// Records fires that did not run, with the reason users will ask for.
    func noteSkip(_ name: JobName, count: Int, reason: String) {
        guard var job = jobs[name] else { return }
        skippedTotal += count
        job.skipped += count
        job.lastSkip = (SystemClock.wallNow(), reason)
        jobs[name] = job
        log.notice(job: name.rawValue, count == 1 ? "fire skipped: \(reason)" : "\(count) fires skipped: \(reason)")
        emit("skipped", job: name, reason: count == 1 ? reason : "\(count) fires: \(reason)")
    }

    /// The wall-clock instant of a monotonic one (for display and `TIMERD_SCHEDULED_AT`).
    func wallTime(ofMono mono: UInt64) -> WallTime {
        let now = SystemClock.monoNow()
        let wallNow = SystemClock.wallNow()
        return wallNow + .nanoseconds(Int64(bitPattern: mono &- now))
    }

    /// Who a job's commands run as (nil: timerd's own identity): `user=`/`group=` when set, else the
    /// job's owner when that is not timerd's own user (`docs/security.md`).
    func runAs(_ job: Job) -> RunAs? {
        if let user = job.spec.user { return RunAs(user: .named(user), group: job.spec.group) }
        if job.ownerUID != Client.daemonUID || job.spec.group != nil {
            return RunAs(user: .uid(job.ownerUID), group: job.spec.group)
        }
        return nil
    }

    /// The base environment of a run as `runAs`: without timerd's own `HOME`, `USER`, `LOGNAME` and `PATH`
    /// when it runs as another user (the launcher sets that user's).
    func baseEnvironment(runAs: RunAs?) -> [KeyValue] {
        guard runAs != nil else { return baseEnvironment }
        return baseEnvironment.filter { !RunAs.accountVariables.contains($0.key) }
    }

    /// The child's environment: the base, the job's `env`, then `TIMERD_*` and `meta` as `TIMERD_META_*`.
    private func environment(for spec: JobSpec, runID: Int, scheduled: WallTime, runAs: RunAs?) -> [String: String] {
        var values: [String: String] = [:]
        for pair in baseEnvironment(runAs: runAs) { values[pair.key] = pair.value }
        for pair in spec.env { values[pair.key] = pair.value }
        values["TIMERD_JOB"] = spec.name.rawValue
        values["TIMERD_RUN"] = String(runID)
        values["TIMERD_SCHEDULED_AT"] = RFC3339.format(scheduled)
        if let cluster { values["TIMERD_NODE"] = cluster.node }
        for pair in spec.meta { values["TIMERD_META_" + pair.key.uppercased()] = pair.value }
        return values
    }
}
