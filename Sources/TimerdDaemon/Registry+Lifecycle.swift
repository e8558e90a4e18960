import Dispatch
import TimerdCore
import TimerdSystem

/// A config job as the registry receives it.
struct DeclaredJob: Sendable {
    var spec: JobSpec
    var file: String
    var line: Int
}

/// What a reload changed.
struct ReloadSummary: Sendable, Encodable {
    var added: [String] = []
    var changed: [String] = []
    var removed: [String] = []
    var unchanged = 0
}

extension Registry {
    /// Applies a (re-)read config: unchanged jobs keep their timers and state, changed ones are re-armed with
    /// their new spec (keeping counters and pause), removed ones are cancelled, runtime jobs are untouched.
    ///
    /// Checked whole first: a config job whose name a runtime job already has is an `invalid-config` error
    /// and nothing changes.
    func applyConfig(_ declared: [DeclaredJob], maxRunning: Int) throws(TimerdError) -> ReloadSummary {
        let conflicts = declared.compactMap { job -> String? in
            guard let existing = jobs[job.spec.name], existing.origin == .runtime else { return nil }
            return "\(job.file):\(job.line): job \"\(job.spec.name)\" has the name of a job added at run time (cancel that one first)"
        }
        guard conflicts.isEmpty else { throw TimerdError(.invalidConfig, conflicts.joined(separator: "; ")) }

        var summary = ReloadSummary()
        let names = Set(declared.map(\.spec.name))
        for (name, job) in jobs where job.origin != .runtime && !names.contains(name) {
            remove(name, reason: "removed from the config")
            summary.removed.append(name.rawValue)
        }
        let now = SystemClock.monoNow()
        for item in declared {
            let origin = JobOrigin.config(file: item.file, line: item.line)
            guard var job = jobs[item.spec.name] else {
                do {
                    try add(item.spec, origin: origin)
                    summary.added.append(item.spec.name.rawValue)
                } catch {
                    log.error(job: item.spec.name.rawValue, "cannot add: \(error.message)")
                }
                continue
            }
            job.origin = origin
            if job.spec == item.spec {
                jobs[item.spec.name] = job
                summary.unchanged += 1
                continue
            }
            do {
                job.civil = try Self.civilSchedule(for: item.spec)
            } catch {
                log.error(job: item.spec.name.rawValue, "cannot apply the changed spec: \(error.message); keeping the old one")
                jobs[item.spec.name] = job
                continue
            }
            job.spec = item.spec
            job.shared = sharesJob(item.spec, origin: origin)
            job.acceptedFires = 0
            disarm(&job)
            if job.state == .finished { job.state = .scheduled }
            startSchedule(&job, from: now)
            jobs[item.spec.name] = job
            arm(item.spec.name)
            summary.changed.append(item.spec.name.rawValue)
            log.info(job: item.spec.name.rawValue, "changed in the config; re-armed: \(item.spec.schedule.summary)")
        }
        initialConfigApplied = true
        if maxRunning != self.maxRunning {
            log.info("max_running is now \(maxRunning) (was \(self.maxRunning))")
            self.maxRunning = maxRunning
            startWaitingRuns()
        }
        return summary
    }

    /// Graceful stop: no more fires, running jobs get `grace` to finish, then their process groups are killed.
    /// Returns when no run is left.
    func shutdown(grace: Duration) async {
        shuttingDown = true
        for name in Array(jobs.keys) {
            disarm(&jobs[name]!)
            jobs[name]!.queued = nil
            jobs[name]!.waitingForSlot = 0
        }
        waiting.removeAll()
        guard runningTotal > 0 else { return }
        log.notice("stopping: waiting up to \(DurationText.format(grace)) for \(runningTotal) running job(s)")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(Int(grace.nanoseconds)))
        timer.setEventHandler { [unowned self] in
            self.assumeIsolated { registry in
                registry.log.warning("stopping: grace period over; killing \(registry.runningTotal) run(s)")
                for job in registry.jobs.values {
                    for run in job.active { run.handle?.kill(reason: "timerd stopped and the grace period ran out") }
                }
                for handle in registry.orphanHandles.values { handle.kill(reason: "timerd stopped and the grace period ran out") }
            }
        }
        timer.activate()
        await withCheckedContinuation { drainWaiters.append($0) }
        timer.cancel()
    }
}
