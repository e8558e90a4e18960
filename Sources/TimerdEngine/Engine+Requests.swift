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
        if addsBeingSaved.names.contains(spec.name) {
            throw TimerdError(.exists, "a job named \(spec.name) is being added; pick another name")
        }
        let maxJobs = settings.userMaxJobs
        // Jobs of a cancel taking effect are gone already.
        let owned = jobs.countByOwner[request.owner.uid, default: 0] - cancelPendingByOwner[request.owner.uid, default: 0]
            + addsBeingSaved.byOwner[request.owner.uid, default: 0]
        if !request.owner.isAdmin, owned >= maxJobs {
            throw TimerdError(.tooManyJobs, "uid \(request.owner.uid) already has \(maxJobs.counted("job")) (user_max_jobs); cancel some first")
        }
        if let upstream = spec.after, request.origin == .runtime, jobs[upstream] == nil || isCancelPending(jobs[upstream]!) {
            throw TimerdError(.badArgument, "after: no job named \(upstream) to follow", key: "after")
        }
        if !spec.runOn.isEmpty, request.origin == .runtime, settings.clusterNode == nil {
            throw TimerdError(.badArgument, "run_on= places shared jobs on a cluster's nodes; this timerd is not in cluster mode (its config has no [cluster] section)", key: "run_on")
        }
        if let pool = spec.pool, settings.pools[pool] == nil {
            let known = settings.pools.keys.sorted()
            throw TimerdError(.badArgument, "pool: no pool named \"\(pool)\" in timerd's config ("
                + (known.isEmpty ? "it declares none" : "it has \(known.joined(separator: ", "))") + ")", key: "pool")
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

    // MARK: - Changes asked for
    //
    // A request is checked at once; what it changes takes effect only once its records are durable
    // (`Effect.writeAhead`), so an error reply always means nothing changed. Each verb has a check
    // (throws, changes nothing), the records it writes ahead, and its change.

    /// A request: its answer now when it changes nothing durable, or nil while its records are written.
    mutating func request(_ input: Input) -> Result<Answer, TimerdError>? {
        if case .cancel(let names, let requester, false) = input, names.count > Self.cancelSlice {
            return startCancel(names, by: requester)
        }
        let change: PlannedChange
        do { change = try plan(input) } catch { return .failure(error) }
        guard !change.records.isEmpty else { return apply(change) }
        let number = nextChangeNumber
        nextChangeNumber += 1
        awaitingSave[number] = change
        if case .add(let job, _) = change.kind { addsBeingSaved.insert(job) }
        out.append(.writeAhead(change: number, records: change.records))
        return nil
    }

    private mutating func plan(_ input: Input) throws(TimerdError) -> PlannedChange {
        switch input {
        case .add(let request):
            try checkAddLoggingRefusal(request)
            let job = makeJob(request)
            return PlannedChange(kind: .add(job, request), records: isSavedByRequests(job) ? [.job(storedState(job))] : [])
        case .cancel(let names, let requester, let checkOnly):
            let jobs = try checkCancel(names, by: requester)
            if checkOnly { return PlannedChange(kind: .checked, records: []) }
            return PlannedChange(kind: .cancel(jobs), records: jobs.filter(isSavedByRequests).map { .deleteJob($0.name) })
        case .pause(let names, let requester, let checkOnly):
            try checkPause(names, by: requester)
            if checkOnly { return PlannedChange(kind: .checked, records: []) }
            let records = savedJobs(names).filter { $0.state == .scheduled }.map { job -> Persist in
                var stored = storedState(job)
                stored.paused = true
                return .job(stored)
            }
            return PlannedChange(kind: .pause(names), records: records)
        case .resume(let names, let mode, let requester, let checkOnly):
            try checkResume(names, mode: mode, by: requester)
            if checkOnly { return PlannedChange(kind: .checked, records: []) }
            let records = savedJobs(names).filter { $0.state == .paused || !mode.isOnSchedule }.map { job -> Persist in
                var stored = storedState(job)
                stored.paused = false
                if case .after(let delay) = mode, case .every = job.spec.schedule { stored.anchor = now.wall(of: now.mono + delay) }
                return .job(stored)
            }
            return PlannedChange(kind: .resume(names, mode), records: records)
        case .runNow(let name, let requester, let parameters, let force):
            let job = try checkRunNow(name, by: requester, force: force)
            if !parameters.arguments.isEmpty, case .webhook = job.spec.action {
                throw TimerdError(.badArgument, "\(name) sends a webhook: arguments after -- are for commands")
            }
            guard isSavedByRequests(job) else { return PlannedChange(kind: .runNow(name, parameters, force: force), records: []) }
            // The run count as it will be once this fire starts (it may wait for a run slot or a run).
            let startsNow = (job.active.isEmpty && job.waitingForSlot == 0 || job.spec.overlap == .allow || force)
                && runningTotal < settings.maxRunning
            let runs = job.runs + (startsNow ? 1 : 0)
            return PlannedChange(
                kind: .runNow(name, parameters, force: force),
                records: [.fire(name, runs: runs, lastScheduled: job.lastScheduledWall, configJob: false)])
        default:
            preconditionFailure("not a request that changes jobs: \(input)")
        }
    }

    /// A checked change takes effect (its records, if any, are durable).
    mutating func apply(_ change: PlannedChange) -> Result<Answer, TimerdError> {
        savedAhead = change.records[...]
        defer { savedAhead = [] }
        switch change.kind {
        case .checked:
            return .success(.done)
        case .add(let job, let request):
            return Result { () throws(TimerdError) in
                try insert(job, request, recorded: !change.records.isEmpty)
                return .done
            }
        case .cancel(let jobs):
            // Several jobs: one line for them all; a job that leaves runs going or fires pending still has
            // its own (100,000 lines that each said "cancelled" held the log's queue, which dropped some).
            if jobs.count == 1 {
                remove(jobs[0].name, reason: "cancelled", stopRuns: true)
                return .success(.done)
            }
            // (More than a slice go through `startCancel`.)
            let removed = jobs.map(\.name).filter { remove($0, reason: "cancelled", logged: false, stopRuns: true) }
            if !removed.isEmpty { log(.info, Self.cancelledSummary(removed)) }
            return .success(.done)
        case .pause(let names):
            pause(names)
            return .success(.done)
        case .resume(let names, let mode):
            resume(names, mode: mode)
            return .success(.done)
        case .runNow(let name, let parameters, let force):
            guard let job = jobs[name] else { return .failure(TimerdError(.noSuchJob, "no job named \(name)")) }
            guard !shuttingDown else { return .failure(TimerdError(.shuttingDown, "timerd is shutting down")) }
            let with = parameters.isEmpty ? "" : " with \(parameters.description)"
            log(.info, name, "run requested (RUN\(force ? ", forced" : "")\(with))")
            let status = fire(job, PendingFire(kind: .manual, scheduled: now.mono, scheduledWall: now.wall, sequence: 0,
                                               parameters: parameters.isEmpty ? nil : parameters), forced: force)
            persistFire(job)
            return .success(.fire(status))
        }
    }

    /// The jobs among `names` whose request changes are written ahead: the durable ones, but not cluster
    /// jobs (etcd holds those; this node's copy is a cache written after).
    private func savedJobs(_ names: [JobName]) -> [EngineJob] {
        names.compactMap { jobs[$0] }.filter(isSavedByRequests)
    }

    func isSavedByRequests(_ job: EngineJob) -> Bool { isDurable(job) && !job.shared }

    /// Emits a durable change, unless the change being applied wrote it ahead.
    mutating func persist(_ change: Persist) {
        if savedAhead.first == change {
            savedAhead.removeFirst()
            return
        }
        if let index = savedAhead.firstIndex(of: change) {
            savedAhead.remove(at: index)
            return
        }
        out.append(.persist(change))
    }

    // MARK: - Adding and removing

    /// Adds a job and arms it at once (config jobs; requests go through `request`).
    mutating func add(_ request: AddJob) throws(TimerdError) {
        try checkAddLoggingRefusal(request)
        try insert(makeJob(request), request)
    }

    /// `checkAdd`, logging a refusal for `user_max_jobs` (an operator wants to see who hits the limit).
    private mutating func checkAddLoggingRefusal(_ request: AddJob) throws(TimerdError) {
        do {
            try checkAdd(request)
        } catch where error.code == .tooManyJobs {
            let limit = settings.userMaxJobs
            log(.warning, Self.refusedForTooManyJobs(request, limit: limit))
            throw error
        }
    }

    /// A new job for `request`, its schedule started from now; not in the table yet.
    private mutating func makeJob(_ request: AddJob) -> EngineJob {
        let spec = request.spec
        let job = EngineJob(id: nextJobID, spec: spec, origin: request.origin, ownerUID: request.owner.uid)
        nextJobID += 1
        job.shared = sharesJob(spec, origin: request.origin)
        job.civil = request.civil
        if spec.owner == .connection { job.ownerConnection = request.connection }
        job.addedWall = now.wall
        startSchedule(job)
        if let grid = job.grid { job.anchorWall = now.wall(of: grid.first) }
        return job
    }

    /// Puts a job made by `makeJob` in the table and arms it. `recorded`: `plan` wrote the job's record
    /// ahead, made from this job, which nothing has changed since (it was in no table): it is not
    /// described and compared again (that was 7% of a pipelined `ADD`'s instructions).
    private mutating func insert(_ job: EngineJob, _ request: AddJob, recorded: Bool = false) throws(TimerdError) {
        let spec = request.spec
        let name = spec.name
        // Only a config job or a cluster job can have taken the name while the request was written.
        if let existing = jobs[name] {
            throw TimerdError(.exists, "a job named \(name) already exists (\(existing.origin == .runtime ? "added at run time" : "declared in the config"))")
        }
        noteNameUsed(name)
        jobs[name] = job
        if recorded { savedAhead.removeFirst() } else { persistJob(job) }
        if settings.logs { addedUnlogged.append(job) }
        if case .webhook(let hook) = spec.action, hook.insecure {
            log(.warning, name, "insecure=yes: the server's TLS certificate is not verified")
        }
        decide(.added(name, origin: request.origin.label))
        if case .at(let time) = spec.schedule, time < now.wall {
            // Only config jobs get here: their time passed before this daemon loaded them. At start-up,
            // `restore` applies the job's misfire policy; at a reload the time is simply past.
            job.state = .finished
            if initialConfigApplied {
                noteSkip(job, count: 1, scheduled: time, reason: "its time \(RFC3339.format(time)) passed before timerd loaded it")
            }
            return
        }
        if job.civil != nil, job.nextWall == nil {
            job.state = .finished
            log(.warning, name, "\(spec.schedule.summary) has no fire time after now; the job will never fire")
            return
        }
        arm(job)
    }

    /// Throws what cancelling would: every job must exist, be the requester's, and be a runtime job.
    /// Returns the jobs.
    mutating func checkCancel(_ names: some Collection<JobName>, by requester: Requester) throws(TimerdError) -> [EngineJob] {
        try names.map { name throws(TimerdError) in
            let job = try lookup(name, changedBy: requester)
            if case .config(let file, let line) = job.origin {
                throw TimerdError(
                    .declaredInConfig,
                    "\(name) is declared in \(file):\(line); remove it there and reload" + (job.state == .finished ? "" : " (it can be paused)"))
            }
            return job
        }
    }

    /// `cancelled 3 jobs: a, b, c`; beyond ten names, `…, j9 and 990 more`.
    static func cancelledSummary(_ names: [JobName]) -> String {
        namesSummary("cancelled", names)
    }

    /// One line for many jobs: `VERB N jobs[ DETAIL]: a, b, … and M more` (the first ten named).
    static func namesSummary(_ verb: String, _ names: [JobName], detail: String = "") -> String {
        let shown = names.prefix(10).map(\.rawValue).joined(separator: ", ")
        return "\(verb) \(names.count.counted("job"))\(detail): " + shown + (names.count > 10 ? " and \(names.count - 10) more" : "")
    }

    /// Removes a job, stops its timer and drops its pending fires. Its runs in progress are stopped as
    /// their `kill_mode` says when `stopRuns` (a `CANCEL`: SIGTERM, SIGKILL after `kill_grace`), else they
    /// finish on their own (a job gone from the config, or from this node in a cluster). Logs why, unless
    /// `logged` is false and there is nothing to say but `reason`. False when there is no such job.
    @discardableResult
    package mutating func remove(_ name: JobName, reason: String, logged: Bool = true, stopRuns: Bool = false) -> Bool {
        guard let job = jobs.removeValue(forKey: name) else { return false }
        // Removed otherwise (its owner went) while its cancel takes effect: no longer counted as pending.
        if isCancelPending(job) { notePendingGone(job) }
        // Read in the spec's box: `job.spec` copies the whole spec (three copies per job were a third
        // of a CANCEL of 100,000 jobs).
        let spec = job.specBox
        // A runtime job's stored spec and history go with it; a config job removed from the config keeps
        // its history (`docs/state.md`), only its last scheduled fire is forgotten.
        if spec.spec.owner == nil { persist(job.origin == .runtime ? .deleteJob(name) : .forgetConfigJob(name)) }
        disarm(job)
        if case .process = spec.spec.owner { out.append(.unwatchOwner(name, jobID: job.id)) }
        let dropped = job.pending
        if job.waitingForSlot > 0 { waiting.removeAll { $0.jobID == job.id } }
        for run in job.active {
            orphanRuns.append((name, job.id, run.id))
            if stopRuns { out.append(.stopRun(name, jobID: job.id, run: run.id, reason: reason, kill: false)) }
        }
        var message = reason
        if !job.active.isEmpty {
            message += stopRuns ? "; stopping its \(job.active.count.counted("run")) in progress"
                : "; \(job.active.count.counted("run")) still going will finish on \(job.active.count == 1 ? "its" : "their") own"
        }
        if dropped > 0 { message += "; \(dropped.counted("pending fire")) dropped" }
        if logged || message != reason { log(.info, name, message) }
        decide(.cancelled(name, reason: message, tags: spec.spec.tags, ownerUID: job.ownerUID))
        return true
    }

    private mutating func checkPause(_ names: [JobName], by requester: Requester) throws(TimerdError) {
        for name in names {
            let job = try lookup(name, changedBy: requester)
            if job.state == .finished { throw finishedError(job) }
        }
    }

    /// Pauses jobs: their timers stop; fires that fall due while paused are skipped (reported at resume).
    /// `reason`: why timerd pauses them itself (nil: a `PAUSE`).
    mutating func pause(_ names: [JobName], reason: String? = nil) {
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
            job.pauseReason = reason
            if let retry = job.pendingRetry {
                job.pendingRetry = nil
                noteSkip(job, count: 1, scheduled: retry.fire.scheduledWall, sequence: retry.fire.sequence,
                         reason: "attempt \(retry.fire.attempt) dropped: the job was paused")
            }
            log(reason == nil ? .info : .warning, name, reason ?? "paused")
            persistJob(job)
            decide(.paused(name, reason: reason))
        }
    }

    private mutating func checkResume(_ names: [JobName], mode: ResumeMode, by requester: Requester) throws(TimerdError) {
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        for name in names {
            let job = try lookup(name, changedBy: requester)
            if job.state == .finished { throw finishedError(job) }
            if job.shared, !mode.isOnSchedule {
                throw TimerdError(.badArgument, "\(name) is a cluster job: RESUME it on its schedule (then RUN it if it must run now)")
            }
        }
    }

    /// Resumes paused jobs (a job that is not paused is left alone, so resuming is idempotent).
    mutating func resume(_ names: [JobName], mode: ResumeMode) {
        for name in names {
            guard let job = jobs[name] else { continue }
            let wasPaused = job.state == .paused
            if !wasPaused, case .onSchedule = mode { continue }
            decide(.resumed(name))
            job.state = .scheduled
            // Failures in a row count again from here (`pause_after_failures`).
            job.consecutiveFailures = 0
            job.pauseReason = nil
            switch mode {
            case .onSchedule:
                let missed = resumeOnSchedule(job)
                log(.info, name, missed > 0 ? "resumed; \(missed.counted("fire")) fell due while paused and \(missed == 1 ? "was" : "were") skipped" : "resumed")
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
                case .after, .at, .cron, .calendar, .triggered:
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

    /// Throws what `RUN` would throw, and takes the owner's run token for it.
    private mutating func checkRunNow(_ name: JobName, by requester: Requester, force: Bool) throws(TimerdError) -> EngineJob {
        guard !shuttingDown else { throw TimerdError(.shuttingDown, "timerd is shutting down") }
        let job = try lookup(name, changedBy: requester)
        if !job.active.isEmpty, !force {
            switch job.spec.overlap {
            case .skip:
                throw TimerdError(.busy, "\(name) is still running (run \(job.active[0].id)) and overlap=skip; RUN \(name) force=yes "
                                  + "(timerctl run --force) starts another alongside")
            case .queue where job.queued != nil, .replace where job.queued != nil:
                throw TimerdError(.busy, "\(name) is still running and a fire is already queued; RUN \(name) force=yes "
                                  + "(timerctl run --force) starts another alongside")
            default: break
            }
        }
        if !takeRunToken(ownerUID: job.ownerUID) {
            let limit = settings.userMaxRunsPerMinute
            throw TimerdError(.rateLimited, "uid \(job.ownerUID)'s jobs started \(limit.counted("run")) in the last minute (user_max_runs_per_minute); try again later")
        }
        return job
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

    /// A config job cannot be cancelled and added again: its schedule is changed in its file.
    private func finishedError(_ job: EngineJob) -> TimerdError {
        let again = if case .config(let file, let line) = job.origin {
            "give it a new schedule in \(file):\(line) and reload"
        } else {
            "cancel it and add it again"
        }
        return TimerdError(.finished, "\(job.name) has finished its schedule; RUN it by hand, or \(again)")
    }

    // MARK: - Config

    /// Applies a (re-)read config: unchanged jobs keep their state, changed ones are re-armed with their
    /// new spec (keeping counters and pause), removed ones are cancelled, runtime jobs are untouched.
    /// Checked whole first: a config job whose name a runtime job has is an `invalid-config` error and
    /// nothing changes.
    mutating func applyConfig(_ declared: [DeclaredJob], maxRunning: Int, pools: [String: Int] = [:]) throws(TimerdError) {
        let conflicts = declared.compactMap { job -> String? in
            if addsBeingSaved.names.contains(job.spec.name) {
                return "\(job.file):\(job.line): job \"\(job.spec.name)\" has the name of a job being added at run time"
            }
            guard let existing = jobs[job.spec.name], existing.origin == .runtime else { return nil }
            return "\(job.file):\(job.line): job \"\(job.spec.name)\" has the name of a job added at run time (cancel that one first)"
        }
        guard conflicts.isEmpty else { throw TimerdError(.invalidConfig, conflicts.joined(separator: "; ")) }
        // The pools before the jobs, which are checked against them.
        if pools != settings.pools {
            let before = settings.pools
            for (name, cap) in pools.sorted(by: { $0.key < $1.key }) where before[name] != cap {
                log(.info, "pool \(name): max_running is now \(cap)" + (before[name].map { " (was \($0))" } ?? ""))
            }
            settings.pools = pools
        }

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
                    if item.runs > 0, let job = jobs[item.spec.name] {
                        job.runs = max(job.runs, item.runs)
                        job.nextRunID = max(job.nextRunID, item.runs + 1)
                    }
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
            jobs.setSpec(item.spec, of: job)
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
        }
        startWaitingRuns()
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
