import Dispatch
import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdStore
import TimerdSystem

/// Carrying out the engine's effects: timers (`Registry+Timers.swift`), runs, owner watches, the store,
/// the cluster, watchers, statistics and the log.
extension Registry {
    func interpret(_ effect: Effect) {
        switch effect {
        case .arm(let name, let jobID, let deadline, let leeway):
            arm(name, jobID: jobID, deadline, leeway: leeway)
        case .disarm(_, let jobID):
            disarm(jobID: jobID)
        case .startRun(let start):
            startRun(start)
        case .stopRun(let name, let jobID, let run, let reason, let kill):
            guard let handle = runHandles["\(jobID)/\(run)"] else { return }
            if kill {
                handle.kill(reason: reason)
            } else {
                handle.stop(reason: reason)
            }
            log.debug(job: name.rawValue, run: run, kill ? "killing: \(reason)" : "stopping: \(reason)")
        case .claim(let name, let jobID, let instant, let triggered, let token):
            guard let cluster else { return }
            cluster.claim(name, at: instant, triggered: triggered) { [unowned self] outcome in
                self.enqueue { registry in
                    switch outcome {
                    case .won: registry.deliver(.claimDecided(name, jobID: jobID, token: token, won: true, reason: ""))
                    case .lost(let reason): registry.deliver(.claimDecided(name, jobID: jobID, token: token, won: false, reason: reason))
                    }
                }
            }
        case .publishRun(let record, let final):
            publishRun(record, final: final)
        case .persist(let change):
            persist(change)
        case .unwatchOwner(let name, let jobID):
            if let entry = ownerWatches[name], entry.jobID == jobID {
                ownerWatches[name] = nil
                Self.release(entry.watch)
            }
        case .notifyTransition(let name, let run, let outcome, let recovered):
            guard let job = engine.job(name) else { return }
            notifyTransition(job.spec, runAs: runAs(job), runID: run, outcome: outcome, recovered: recovered)
        case .decision(let decision):
            note(decision)
        case .log(let level, let job, let run, let message):
            log.log(level, job: job?.rawValue, run: run, message)
        case .drained:
            let waiters = drainWaiters
            drainWaiters = []
            for waiter in waiters { waiter.resume() }
        case .reply, .writeAhead:
            break  // taken by `handle`
        }
    }

    // MARK: - Runs

    private func startRun(_ start: RunStart) {
        let name = start.job
        var request = RunRequest(
            job: name.rawValue, runID: start.run, action: start.spec.action, environment: [:],
            workingDirectory: start.spec.cwd ?? "/", timeout: start.spec.timeout, killGrace: start.spec.killGrace,
            killMode: start.spec.killMode ?? .controlGroup)
        let ownerUID = start.ownerUID
        if case .webhook(let hook) = start.spec.action {
            request.webhookBody = Self.webhookBody(hook, spec: start.spec, runID: start.run, scheduled: start.scheduled, fired: clock.wallNow)
        } else {
            request.runAs = runAs(spec: start.spec, ownerUID: ownerUID)
            request.resources = Client.isAdmin(uid: ownerUID) ? start.spec.resources
                : start.spec.resources.capped(by: access.settings.userCeiling)
            request.successExitCodes = start.spec.successExitCodes ?? [0]
            request.logFile = start.spec.logFile.map { RunLogFile.Settings(path: $0.path, maxSize: $0.maxSize, keep: $0.keep) }
            request.failOnStderr = start.spec.failOnStderr ?? false
            // A run by hand was not due: no TIMERD_SCHEDULED_AT, as its history's scheduled_at is null.
            request.environment = environment(
                for: start.spec, runID: start.run, scheduled: start.kind == .manual ? nil : start.scheduled, runAs: request.runAs)
            if start.spec.commandRetries != nil { request.environment["TIMERD_ATTEMPT"] = String(start.attempt) }
            if let trigger = start.trigger {
                request.environment["TIMERD_TRIGGERED_BY"] = trigger.job.rawValue
                request.environment["TIMERD_TRIGGER_RUN"] = String(trigger.run)
            }
            if let parameters = start.parameters {
                for pair in parameters.env { request.environment[pair.key] = pair.value }
                request.extraArguments = parameters.arguments
            }
        }
        let key = "\(start.jobID)/\(start.run)"
        let jobID = start.jobID
        let runID = start.run
        runStarts[key] = clock.monotonicNow
        runHandles[key] = launcher.start(request) { [unowned self] event in
            self.enqueue { $0.runEvent(name, jobID: jobID, runID: runID, event: event) }
        }
        noteStatusChange()
    }

    /// A launcher's report about a run.
    func runEvent(_ name: JobName, jobID: UInt64, runID: Int, event: RunEvent) {
        let key = "\(jobID)/\(runID)"
        switch event {
        case .started(let pid):
            if let asked = runStarts.removeValue(forKey: key) {
                let now = clock.monotonicNow
                execLatency.record((now - asked).nanoseconds, at: now)
            }
            deliver(.runStarted(name, jobID: jobID, run: runID, pid: pid))
        case .finished(let outcome):
            runStarts[key] = nil
            runHandles[key] = nil
            if engine.job(name)?.id == jobID { outputs.hold(outcome.output, of: name, jobID: jobID, limit: access.settings.maxOutputMemory, log: log) }
            deliver(.runFinished(name, jobID: jobID, run: runID, outcome))
            noteStatusChange()
        }
    }

    /// Who a job's commands run as (nil: timerd's own identity): `user=`/`group=` when set, else the
    /// job's owner when that is not timerd's own user (`docs/security.md`).
    func runAs(_ job: EngineJob) -> RunAs? { runAs(spec: job.spec, ownerUID: job.ownerUID) }

    func runAs(spec: JobSpec, ownerUID: UInt32) -> RunAs? {
        if let user = spec.user { return RunAs(user: .named(user), group: spec.group) }
        if ownerUID != Client.daemonUID || spec.group != nil {
            return RunAs(user: .uid(ownerUID), group: spec.group)
        }
        return nil
    }

    /// The base environment of a run as `runAs`: without timerd's own `HOME`, `USER`, `LOGNAME` and `PATH`
    /// when it runs as another user (the launcher sets that user's).
    func baseEnvironment(runAs: RunAs?) -> [KeyValue] {
        guard runAs != nil else { return baseEnvironment }
        return baseEnvironment.filter { !RunAs.accountVariables.contains($0.key) }
    }

    /// The child's environment: the base, the job's `env`, then `TIMERD_*` and `meta` as `TIMERD_META_*`;
    /// `TIMERD_SCHEDULED_AT` only with `scheduled` (nil for a run by hand).
    private func environment(for spec: JobSpec, runID: Int, scheduled: WallTime?, runAs: RunAs?) -> [String: String] {
        var values: [String: String] = [:]
        for pair in baseEnvironment(runAs: runAs) { values[pair.key] = pair.value }
        for pair in spec.env { values[pair.key] = pair.value }
        values["TIMERD_JOB"] = spec.name.rawValue
        values["TIMERD_RUN"] = String(runID)
        if let scheduled { values["TIMERD_SCHEDULED_AT"] = RFC3339.format(scheduled) }
        if let cluster { values["TIMERD_NODE"] = cluster.node }
        for pair in spec.meta { values["TIMERD_META_" + pair.key.uppercased()] = pair.value }
        return values
    }

    // MARK: - Decisions

    /// A decision: to `WATCH`, to the statistics, to `STATUS=`.
    private func note(_ decision: Decision) {
        switch decision {
        case .added(let name, _):
            emit("added", job: name)
        case .fired(let name, let scheduled, let late, let byTimer):
            if byTimer {
                let now = clock.monotonicNow
                lateness.record(late.nanoseconds, at: now)
                latenessHistogram.record(seconds: Double(late.nanoseconds) / 1e9)
            }
            emit("fired", job: name, scheduledAt: scheduled, latenessNs: late.nanoseconds)
        case .running(let name, let run, _):
            emit("started", job: name, run: run)
        case .finished(let name, let run, let outcome):
            log.log(outcome.result == .ok ? .info : .warning, job: name.rawValue, run: run, exitStatus: outcome.exitStatusField,
                    outcome.summary)
            emit("finished", job: name, run: run, result: outcome.result.rawValue, exitCode: outcome.exitCode,
                 httpStatus: outcome.httpStatus, reason: outcome.reason, usage: outcome.usage)
        case .skipped(let name, _, let count, let reason), .missed(let name, _, let count, let reason):
            emit("skipped", job: name, reason: count == 1 ? reason : "\(count) fires: \(reason)")
        case .cancelled(let name, let reason, let tags, let ownerUID):
            outputs.forget(name)
            emit("cancelled", job: name, reason: reason, gone: (tags, ownerUID))
        case .paused(let name, let reason):
            emit("paused", job: name, reason: reason)
        case .retrying(let name, let run, _, _, let reason):
            emit("retrying", job: name, run: run, reason: reason)
        case .resumed(let name):
            emit("resumed", job: name)
        case .clockSet(let reason, let now):
            emitDaemonEvent("clock", reason: "\(reason); now \(RFC3339.format(now))")
        case .started, .held, .queued, .modeChanged:
            break
        }
        noteStatusChange()
    }

    // MARK: - Owners

    /// Opens and watches the pidfd of an `owner=pid:N` job's process (nil for other jobs). Throws
    /// `bad-argument` when there is no such process.
    func watchOwner(of spec: JobSpec, origin: JobOrigin) throws(TimerdError) -> IOWatcher.Registration? {
        guard case .process(let pid) = spec.owner, origin == .runtime else { return nil }
        // The pidfd pins this very process: if it exits, the watch fires even when its PID is reused.
        let pidfd: FileDescriptor
        do {
            pidfd = try ProcessControl.openPidfd(pid)
        } catch {
            throw TimerdError(.badArgument, "owner: no process \(pid) (\(error))", key: "owner")
        }
        let name = spec.name
        do {
            return try IOWatcher.shared.watch(pidfd, for: .readable, on: queue) { [unowned self] _ in
                self.assumeIsolated { registry in
                    guard let entry = registry.ownerWatches[name] else { return }
                    registry.deliver(.ownerGone(name, jobID: entry.jobID, reason: "cancelled: its owner process \(pid) exited"))
                }
            }
        } catch {
            try? pidfd.close()
            throw TimerdError(.internal, "cannot watch process \(pid): \(error)")
        }
    }

    nonisolated static func release(_ watch: IOWatcher.Registration) {
        IOWatcher.shared.cancel(watch)
        try? watch.fd.close()
    }
}
