import Dispatch
import TimerdCore
import TimerdEngine
import TimerdHost
import TimerdSystem

/// Cron and calendar jobs: their zone, their next fire on the wall clock, jitter, and what happens when
/// the wall clock is set.
extension Registry {
    /// The wall clock was set (an NTP step, `date -s`, a resume from suspend, or the test clock): the
    /// engine re-arms every wall-clock job at once for its new next fire.
    func wallClockChanged(reason: String) {
        deliver(.wallClockSet(reason: reason))
        // The wall timer was set as a delay from the wall clock's old now.
        setTimer(.wall, force: true)
    }

    /// Re-reads the zones of all cron and calendar jobs (after `SystemTimeZones.forgetLoadedZones`) and
    /// hands the engine those whose rules changed, e.g. after a tzdata update. Called on reload.
    func reloadZones() {
        var changed: [JobName: CivilSchedule] = [:]
        for job in engine.liveJobs {
            let name = job.name
            guard let old = job.civil, let fresh = try? HostConfig.civilSchedule(for: job.spec), fresh != old else { continue }
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
