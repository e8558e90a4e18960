import Dispatch
import TimerdCore
import TimerdEngine
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

    /// `/etc/machine-id`, the seed of fixed jitter (as for systemd's `FixedRandomDelay=`); the host name
    /// when it is missing.
    static let machineID: String = {
        if let bytes = try? FileSystem.readFile("/etc/machine-id") {
            let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
            if !text.isEmpty { return text }
        }
        return (try? CurrentProcess.hostname()) ?? "localhost"
    }()

    /// The wall clock was set (an NTP step, `date -s`, a resume from suspend, or the test clock): the
    /// engine re-arms every wall-clock job at once for its new next fire.
    func wallClockChanged(reason: String) {
        deliver(.wallClockSet(reason: reason))
    }

    /// Re-reads the zones of all cron and calendar jobs (after `SystemTimeZones.forgetLoadedZones`) and
    /// hands the engine those whose rules changed, e.g. after a tzdata update. Called on reload.
    func reloadZones() {
        var changed: [JobName: CivilSchedule] = [:]
        for (name, job) in engine.jobs {
            guard let old = job.civil, let fresh = try? Self.civilSchedule(for: job.spec), fresh != old else { continue }
            changed[name] = fresh
        }
        if !changed.isEmpty { deliver(.zonesChanged(changed)) }
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
