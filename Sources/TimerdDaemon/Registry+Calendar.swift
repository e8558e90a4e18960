import Dispatch
import TimerdCore
import TimerdSystem

/// Cron and calendar jobs: their zone, their next fire on the wall clock, jitter, and what happens when
/// the wall clock is set.
extension Registry {
    /// The job's schedule resolved in its zone (the job's `timezone`, else the system zone), or nil for
    /// schedules that are not cron or calendar. Throws `bad-argument` for an unknown zone.
    static func civilSchedule(for spec: JobSpec) throws(TimerdError) -> CivilSchedule? {
        let pattern: CivilSchedule.Pattern
        switch spec.schedule {
        case .cron(let expression):
            if expression.isReboot { return nil }
            pattern = .cron(expression)
        case .calendar(let calendar): pattern = .calendar(calendar)
        default: return nil
        }
        let zone = try spec.timezone.map { name throws(TimerdError) in try SystemTimeZones.zone(named: name) }
            ?? SystemTimeZones.systemZone()
        return CivilSchedule(pattern: pattern, zone: zone, gap: spec.dstGap, repeat: spec.dstRepeat)
    }

    /// How long after its scheduled time this fire of `job` starts (`jitter=`): random in [0, jitter], or
    /// the same for every fire with `fixed_jitter=yes`.
    func jitterNanoseconds(_ job: Job) -> Int64 {
        let limit = job.spec.jitter.nanoseconds
        guard limit > 0 else { return 0 }
        if job.spec.fixedJitter {
            return Jitter.fixed(machineID: Self.machineID, name: job.spec.name.rawValue, limit: job.spec.jitter).nanoseconds
        }
        return Int64.random(in: 0...limit)
    }

    /// `/etc/machine-id`, the seed of fixed jitter (as for systemd's `FixedRandomDelay=`); the host name
    /// when it is missing.
    static let machineID: String = {
        if let bytes = try? FileSystem.readFile("/etc/machine-id") {
            let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
            if !text.isEmpty { return text }
        }
        return (try? CurrentProcess.hostname()) ?? "localhost"
    }()

    /// Sets a cron or calendar job's next fire: the first scheduled time after its base.
    /// Returns false when the schedule has no more fires.
    @discardableResult
    func scheduleNextCivilFire(_ job: inout Job) -> Bool {
        guard let civil = job.civil, let base = job.civilBase else { return false }
        guard let next = civil.next(after: base) else {
            job.nextNominal = nil
            job.nextWall = nil
            return false
        }
        job.nextNominal = next
        job.nextWall = next + .nanoseconds(jitterNanoseconds(job))
        return true
    }

    /// A cron or calendar job's timer went off at `wallNow`: the scheduled time it fires for (the latest
    /// one due, when the daemon was stopped or the clock jumped over several), how many were missed, and
    /// the next fire set on the job.
    func advanceCivil(_ job: inout Job, wallNow: WallTime) -> (due: WallTime, missed: Int) {
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
        job.nextWall = following.map { $0 + .nanoseconds(jitterNanoseconds(job)) }
        return (due, missed)
    }

    /// The wall clock was set (an NTP step, `date -s`, a resume from suspend, or the test clock): re-arm
    /// every wall-clock job at once for its new next fire instead of after the old deadline.
    ///
    /// A cron or calendar job whose base (its last scheduled fire) is now in the future counts again from
    /// now, so times that come round again fire again, as systemd does. Interval jobs run on the
    /// monotonic clock and are not touched.
    func wallClockChanged(reason: String) {
        let now = SystemClock.wallNow()
        var rearmed: [JobName] = []
        for (name, job) in jobs where job.state == .scheduled && (job.civil != nil || job.nextWall != nil) {
            rearmed.append(name)
        }
        for name in rearmed {
            guard var job = jobs[name] else { continue }
            if job.civil != nil, job.nextMono == nil {
                if let base = job.civilBase, base > now { job.civilBase = now }
                scheduleNextCivilFire(&job)
            }
            jobs[name] = job
            arm(name)
        }
        log.notice("the wall clock was set (\(reason)); now \(RFC3339.format(now)); re-armed \(rearmed.count) calendar job(s)")
        emitDaemonEvent("clock", reason: "\(reason); now \(RFC3339.format(now))")
    }

    /// Re-reads the zones of all cron and calendar jobs (after `SystemTimeZones.forgetLoadedZones`) and
    /// re-arms those whose rules changed, e.g. after a tzdata update. Called on reload.
    func reloadZones() {
        var changed = 0
        for name in Array(jobs.keys) {
            guard let job = jobs[name], let old = job.civil,
                  let fresh = try? Self.civilSchedule(for: job.spec), fresh != old else { continue }
            changed += 1
            jobs[name]!.civil = fresh
            guard job.state == .scheduled, job.nextMono == nil else { continue }
            scheduleNextCivilFire(&jobs[name]!)
            arm(name)
        }
        if changed > 0 { log.notice("time zone rules changed for \(changed) calendar job(s); re-armed") }
    }

    /// Watches for the wall clock being set (timerfd with `TFD_TIMER_CANCEL_ON_SET`).
    func watchWallClock() {
        do {
            let fd = try ClockChange.makeDescriptor()
            clockWatch = try IOWatcher.shared.watch(fd, for: .readable, on: queue) { [unowned self] _ in
                self.assumeIsolated { registry in
                    do {
                        if try ClockChange.acknowledge(fd) { registry.wallClockChanged(reason: "clock set") }
                    } catch {
                        registry.log.warning("cannot re-arm the clock-change watch: \(error)")
                    }
                }
            }
        } catch {
            log.warning("cannot watch for wall-clock changes (calendar jobs will not be re-armed when the clock is set): \(error)")
        }
    }
}
