import TimerdCore

/// Requests: add, cancel, pause, resume, run, mode; the config's (re)load; stopping.
extension Engine {
    // MARK: - Adding and removing

    /// Throws what adding would throw, changing nothing (a shared job is checked before it is written to
    /// etcd).
    package func checkAdd(_ request: AddJob) throws(TimerdError) {
        let spec = request.spec
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        if let existing = jobs[spec.name] {
            let whence = existing.origin == .runtime ? "added at run time" : "declared in the config"
            throw TimerdError(.exists, "a job named \(spec.name) already exists (\(whence)); cancel it first or pick another name")
        }
        let maxJobs = settings.userMaxJobs
        if !request.owner.isAdmin, jobs.countByOwner[request.owner.uid, default: 0] >= maxJobs {
            throw TimerdError(.tooManyJobs, "uid \(request.owner.uid) already has \(maxJobs) jobs (user_max_jobs); cancel some first")
        }
        if case .at(let time) = spec.schedule, request.origin == .runtime, time < now.wall {
            throw TimerdError(.badArgument, "at: \(RFC3339.format(time)) is in the past", key: "at")
        }
        if case .cron(let expression) = spec.schedule, expression.isReboot, request.origin == .runtime {
            throw TimerdError(.badArgument, "@reboot jobs run once when timerd starts: declare them in the config file", key: "cron")
        }
        if spec.owner != nil, request.origin != .runtime {
            throw TimerdError(.badArgument, "owner applies only to jobs added over the control socket", key: "owner")
        }
        if spec.owner == .connection, request.connection == nil {
            throw TimerdError(.badArgument, "owner=connection needs a control connection", key: "owner")
        }
        if let civil = request.civil, request.origin == .runtime, civil.next(after: now.wall) == nil {
            throw TimerdError(.badArgument, "\(spec.schedule.summary) has no fire time after now", key: spec.schedule.key)
        }
    }

    /// The log line of an `ADD` refused for `user_max_jobs`.
    package static func refusedForTooManyJobs(_ request: AddJob, limit: Int) -> String {
        "control: \(request.owner.label): refused to add \(request.spec.name): user_max_jobs=\(limit) reached"
    }

    /// Whether a job from `origin` is shared in cluster mode: runtime jobs unless `cluster=no`, config
    /// jobs only with `cluster=yes`, jobs bound to an owner never.
    package func sharesJob(_ spec: JobSpec, origin: JobOrigin) -> Bool {
        guard settings.clusterNode != nil, spec.owner == nil else { return false }
        return spec.cluster ?? (origin == .runtime)
    }

    /// Adds a job and arms it.
    mutating func add(_ request: AddJob) throws(TimerdError) {
        do {
            try checkAdd(request)
        } catch where error.code == .tooManyJobs {
            let limit = settings.userMaxJobs
            log(.warning, Self.refusedForTooManyJobs(request, limit: limit))
            throw error
        }
        let spec = request.spec
        let name = spec.name
        let job = EngineJob(id: nextJobID, spec: spec, origin: request.origin, ownerUID: request.owner.uid)
        nextJobID += 1
        namesEverUsed.insert(name.rawValue)
        job.shared = sharesJob(spec, origin: request.origin)
        job.civil = request.civil
        if spec.owner == .connection { job.ownerConnection = request.connection }
        job.addedWall = now.wall
        startSchedule(job)
        if let grid = job.grid { job.anchorWall = now.wall(of: grid.first) }
        jobs[name] = job
        persistJob(job)
        log(.info, name, "added (\(request.origin.label)): \(spec.schedule.summary): \(spec.action.summary)")
        if case .webhook(let hook) = spec.action, hook.insecure {
            log(.warning, name, "insecure=yes: the server's TLS certificate is not verified")
        }
        decide(.added(name, origin: request.origin.label))
        if case .at(let time) = spec.schedule, time < now.wall {
            // Only config jobs get here: their time passed before this daemon loaded them. At start-up,
            // `restore` applies the job's misfire policy; at a reload the time is simply past.
            jobs[name]!.state = .finished
            if initialConfigApplied {
                noteSkip(job, count: 1, scheduled: time, reason: "its time \(RFC3339.format(time)) passed before timerd loaded it")
            }
            return
        }
        if job.civil != nil, job.nextWall == nil {
            jobs[name]!.state = .finished
            log(.warning, name, "\(spec.schedule.summary) has no fire time after now; the job will never fire")
            return
        }
        arm(job)
    }

    /// Cancels runtime jobs. All names are checked first: either every one is cancelled or none is.
    mutating func cancel(_ names: [JobName], by requester: Requester, checkOnly: Bool) throws(TimerdError) {
        for name in names {
            let job = try lookup(name, changedBy: requester)
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
    package mutating func remove(_ name: JobName, reason: String) {
        guard let job = jobs.removeValue(forKey: name) else { return }
        // Its stored spec and history go with it (a config job removed from the config too).
        if job.spec.owner == nil { out.append(.persist(.deleteJob(name))) }
        disarm(job)
        if case .process = job.spec.owner { out.append(.unwatchOwner(name, jobID: job.id)) }
        let dropped = job.pending
        if job.waitingForSlot > 0 { waiting.removeAll { $0.jobID == job.id } }
        for run in job.active { orphanRuns.append((name, job.id, run.id)) }
        var message = reason
        if !job.active.isEmpty { message += "; \(job.active.count) run(s) still going will finish on their own" }
        if dropped > 0 { message += "; \(dropped) pending fire(s) dropped" }
        log(.info, name, message)
        decide(.cancelled(name, reason: message))
    }

    /// Pauses jobs: their timers stop; fires that fall due while paused are skipped (reported at resume).
    mutating func pause(_ names: [JobName], by requester: Requester, checkOnly: Bool) throws(TimerdError) {
        for name in names {
            if try lookup(name, changedBy: requester).state == .finished { throw finishedError(name) }
        }
        if checkOnly { return }
        for name in names where jobs[name]?.state == .scheduled {
            let job = jobs[name]!
            job.state = .paused
            disarm(job)
            let held = job.heldFire
            job.heldFire = nil
            job.heldSince = nil
            if let held {
                noteSkip(job, count: 1, scheduled: held.scheduledWall, sequence: held.sequence,
                         reason: "paused while its fire was held (mode \(currentMode))")
            }
            log(.info, name, "paused")
            persistJob(job)
            decide(.paused(name))
        }
    }

    /// Resumes paused jobs (a job that is not paused is left alone, so resuming is idempotent).
    mutating func resume(_ names: [JobName], mode: ResumeMode, by requester: Requester, checkOnly: Bool) throws(TimerdError) {
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        for name in names {
            let job = try lookup(name, changedBy: requester)
            if job.state == .finished { throw finishedError(name) }
            if job.shared, !mode.isOnSchedule {
                throw TimerdError(.badArgument, "\(name) is a cluster job: RESUME it on its schedule (then RUN it if it must run now)")
            }
        }
        if checkOnly { return }
        for name in names {
            guard let job = jobs[name] else { continue }
            let wasPaused = job.state == .paused
            if !wasPaused, case .onSchedule = mode { continue }
            decide(.resumed(name))
            job.state = .scheduled
            switch mode {
            case .onSchedule:
                let missed = resumeOnSchedule(job)
                log(.info, name, missed > 0 ? "resumed; \(missed) fire(s) fell due while paused and were skipped" : "resumed")
                if missed > 0 { noteSkip(job, count: missed, scheduled: nil, reason: "paused") }
                arm(job)
            case .now:
                // This fire is the schedule's next one: a one-shot is done after it, a repeating job
                // continues on its grid after now.
                if let grid = job.grid {
                    job.nextIndex = grid.index(after: now.mono)
                    job.nextMono = grid.instant(job.nextIndex) + jitter(for: job)
                } else if job.civil != nil {
                    job.nextMono = nil
                    job.civilBase = now.wall
                    scheduleNextCivilFire(job)
                }
                log(.info, name, wasPaused ? "resumed; firing now" : "firing now (RESUME now)")
                decide(.fired(name, scheduled: now.wall, lateness: .zero, byTimer: false))
                fire(job, PendingFire(kind: .scheduled, scheduled: now.mono, scheduledWall: now.wall,
                                       sequence: nextFireSequence(job)))
                continueSchedule(job)
            case .after(let delay):
                let first = now.mono + delay
                switch job.spec.schedule {
                case .every(let interval, _):
                    job.grid = FireGrid(first: first, interval: interval)
                    job.nextIndex = 0
                    job.nextMono = first
                    // The new phase is the one a restart keeps.
                    job.anchorWall = now.wall(of: first)
                case .after, .at, .cron, .calendar:
                    // Calendar jobs fire once after the delay, then go on with their calendar.
                    job.nextMono = first
                    job.nextWall = nil
                    job.nextNominal = nil
                }
                log(.info, name, "resumed; next fire in \(DurationText.format(delay))")
                arm(job)
            }
            persistJob(job)
        }
    }

    /// Fires a job once now, outside its schedule (`RUN`). Returns what happened to the fire.
    mutating func runNow(_ name: JobName, by requester: Requester) throws(TimerdError) -> String {
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        let job = try lookup(name, changedBy: requester)
        if !job.active.isEmpty {
            switch job.spec.overlap {
            case .skip:
                throw TimerdError(.busy, "\(name) is still running (run \(job.active[0].id)) and overlap=skip")
            case .queue where job.queued != nil, .replace where job.queued != nil:
                throw TimerdError(.busy, "\(name) is still running and a fire is already queued")
            default: break
            }
        }
        if !takeRunToken(ownerUID: job.ownerUID) {
            let limit = settings.userMaxRunsPerMinute
            throw TimerdError(.rateLimited, "uid \(job.ownerUID)'s jobs started \(limit) runs in the last minute (user_max_runs_per_minute); try again later")
        }
        log(.info, name, "run requested (RUN)")
        let status = fire(job, PendingFire(kind: .manual, scheduled: now.mono, scheduledWall: now.wall, sequence: 0))
        persistFire(job)
        return status
    }

    // MARK: - Modes

    /// Switches the daemon's mode and starts the held fires of jobs that run in the new one. Returns the
    /// jobs whose fires were released.
    mutating func switchMode(to mode: String) -> [JobName] {
        let previous = currentMode
        currentMode = mode
        var released: [JobName] = []
        guard previous != mode else { return released }
        log(.notice, "mode is now \(mode) (was \(previous))")
        decide(.modeChanged(to: mode, from: previous))
        for name in jobs.keys.sorted() {
            guard let job = jobs[name], let held = job.heldFire, Mode.includes(job.spec.modes, mode) else { continue }
            job.heldFire = nil
            job.heldSince = nil
            job.acceptedFires -= 1  // `fire` counts it again, now that it is really handled
            released.append(name)
            log(.info, name, "held fire released (mode \(mode))")
            // Through `fire`, so the overlap policy and the run cap apply as to any fire.
            fire(job, held)
            noteIfIdleAndFinished(job)
        }
        return released
    }

    // MARK: - Lookup

    package func lookup(_ name: JobName) throws(TimerdError) -> EngineJob {
        guard let job = jobs[name] else { throw TimerdError(.noSuchJob, "no job named \(name)") }
        return job
    }

    /// The job, if `requester` may change it. Throws `no-such-job` or `permission-denied`.
    mutating func lookup(_ name: JobName, changedBy requester: Requester) throws(TimerdError) -> EngineJob {
        let job = try lookup(name)
        guard requester.owns(job.ownerUID) else {
            log(.warning, "control: \(requester.label): refused to change \(name), which belongs to uid \(job.ownerUID)")
            throw TimerdError(.permissionDenied, "\(name) belongs to uid \(job.ownerUID); only its owner and root may change it")
        }
        return job
    }

    private func finishedError(_ name: JobName) -> TimerdError {
        TimerdError(.finished, "\(name) has finished its schedule; RUN it by hand, or cancel it and add it again")
    }

    // MARK: - Config

    /// Applies a (re-)read config: unchanged jobs keep their state, changed ones are re-armed with their
    /// new spec (keeping counters and pause), removed ones are cancelled, runtime jobs are untouched.
    /// Checked whole first: a config job whose name a runtime job has is an `invalid-config` error and
    /// nothing changes.
    mutating func applyConfig(_ declared: [DeclaredJob], maxRunning: Int) throws(TimerdError) {
        let conflicts = declared.compactMap { job -> String? in
            guard let existing = jobs[job.spec.name], existing.origin == .runtime else { return nil }
            return "\(job.file):\(job.line): job \"\(job.spec.name)\" has the name of a job added at run time (cancel that one first)"
        }
        guard conflicts.isEmpty else { throw TimerdError(.invalidConfig, conflicts.joined(separator: "; ")) }

        let names = Set(declared.map(\.spec.name))
        for name in jobs.keys.sorted() where jobs[name]!.origin != .runtime && !names.contains(name) {
            remove(name, reason: "removed from the config")
        }
        let daemon = Requester(uid: settings.daemonUID, isAdmin: true, label: "timerd")
        for item in declared {
            let origin = JobOrigin.config(file: item.file, line: item.line)
            guard let job = jobs[item.spec.name] else {
                do {
                    try add(AddJob(spec: item.spec, origin: origin, owner: daemon, civil: item.civil))
                } catch {
                    log(.error, item.spec.name, "cannot add: \(error.message)")
                }
                continue
            }
            job.origin = origin
            if job.spec == item.spec {
                continue
            }
            job.civil = item.civil
            job.spec = item.spec
            job.shared = sharesJob(item.spec, origin: origin)
            job.acceptedFires = 0
            disarm(job)
            if job.state == .finished { job.state = .scheduled }
            startSchedule(job)
            arm(job)
            log(.info, item.spec.name, "changed in the config; re-armed: \(item.spec.schedule.summary)")
        }
        initialConfigApplied = true
        if maxRunning != settings.maxRunning {
            let previous = settings.maxRunning
            log(.info, "max_running is now \(maxRunning) (was \(previous))")
            settings.maxRunning = maxRunning
            startWaitingRuns()
        }
    }

    // MARK: - Stopping

    /// No more fires; running jobs finish (the interpreter gives them the stop grace, then `killAll`).
    mutating func shutdown() {
        shuttingDown = true
        for name in jobs.keys.sorted() {
            let job = jobs[name]!
            disarm(job)
            job.queued = nil
            job.waitingForSlot = 0
        }
        waiting.removeAll()
        if runningTotal == 0 { out.append(.drained) }
    }

    /// SIGKILL to every run now.
    mutating func killAll(reason: String) {
        for name in jobs.keys.sorted() {
            let job = jobs[name]!
            for run in job.active { out.append(.stopRun(name, jobID: job.id, run: run.id, reason: reason, kill: true)) }
        }
        for orphan in orphanRuns {
            out.append(.stopRun(orphan.job, jobID: orphan.jobID, run: orphan.run, reason: reason, kill: true))
        }
    }
}
