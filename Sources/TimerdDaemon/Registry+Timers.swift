import Dispatch
import Synchronization
import TimerdCore
import TimerdEngine
import TimerdSystem

/// The registry's timers: every armed job's deadline in a `DeadlineQueue`, and one kernel timer per
/// clock (`TimerDescriptor`, watched by the `IOWatcher`) set for the first deadline on it. One armed
/// Dispatch timer per job cost 524 bytes of resident memory each, more than half of an idle job
/// (`docs/architecture.md`, "Timers").
struct RegistryTimers {
    var queue = DeadlineQueue()
    /// Per clock (`DeadlineQueue.ClockKind.rawValue`): its timer, made when first needed.
    var clocks: [ClockTimer?] = [nil, nil]
    /// Per clock: the wake its timer is set for (nil: not set, or it has gone off).
    var setFor: [DeadlineQueue.Wake?] = [nil, nil]
    /// While due jobs are being delivered, setting the timers waits for the end.
    var delivering = false
    /// Per clock: the instant its timer goes off, on `CLOCK_MONOTONIC` (`UInt64.max`: not set).
    var goesOff: [UInt64] = [.max, .max]
}

/// When the registry's timers next go off, on `CLOCK_MONOTONIC` in nanoseconds (`UInt64.max`: neither is
/// set), for work on other threads to keep clear of (`BackgroundThread.Clearance`). Set as they are;
/// read without the registry.
final class NextWake: Sendable {
    private let instant = Atomic<UInt64>(.max)
    var nanoseconds: UInt64 { instant.load(ordering: .relaxed) }
    func set(_ value: UInt64) { instant.store(value, ordering: .relaxed) }
}

/// One clock's timer and its watch.
struct ClockTimer {
    let timer: TimerDescriptor
    let watch: IOWatcher.Registration

    func close() {
        IOWatcher.shared.cancel(watch)
        try? timer.fd.close()
    }
}

/// Arming, disarming and the two clocks' timers (see `RegistryTimers`).
extension Registry {
    /// Arms (or re-arms) the job for `deadline`, then moves its clock's timer if its wake changed.
    func arm(_ name: JobName, jobID: UInt64, _ deadline: Deadline, leeway: Duration) {
        noteStatusChange()
        let (kind, _) = timers.queue.arm(name, jobID: jobID, deadline, leeway: leeway)
        setTimer(kind)
    }

    func disarm(jobID: UInt64) {
        guard timers.queue.disarm(jobID: jobID) else { return }
        noteStatusChange()
        for kind in DeadlineQueue.ClockKind.allCases { setTimer(kind) }
    }

    /// Sets `kind`'s timer for the queue's wake on that clock (or for never), unless it is set for that
    /// already. It goes off at the wake's earliest instant, the first deadline, as a Dispatch timer with
    /// that leeway did on Linux; the rest of the window is what lets jobs due within it go together.
    /// Monotonic wakes are instants on `CLOCK_MONOTONIC` as they are. A wall wake is set on
    /// `CLOCK_REALTIME` as the host's now plus its distance from `clock`'s wall now (they differ under the
    /// test clock), so it is set again when the clock is set (`wallClockChanged`); on `CLOCK_REALTIME` it
    /// still goes off on time after a suspend.
    func setTimer(_ kind: DeadlineQueue.ClockKind, force: Bool = false) {
        guard !timers.delivering else { return }
        let wake = timers.queue.wake(kind)
        guard force || wake != timers.setFor[kind.rawValue] else { return }
        timers.setFor[kind.rawValue] = wake
        defer { nextWake.set(timers.goesOff.min()!) }
        timers.goesOff[kind.rawValue] = .max
        do {
            guard let wake else {
                try timers.clocks[kind.rawValue]?.timer.disarm()
                return
            }
            let timer = clockTimer(kind).timer
            switch kind {
            case .mono:
                try timer.set(at: wake.earliest)
                timers.goesOff[kind.rawValue] = UInt64(clamping: wake.earliest)
            case .wall:
                let delay = max(.zero, WallTime(nanosecondsSinceEpoch: wake.earliest) - clock.wallNow)
                try timer.set(at: (HostClock.wall() + delay).nanosecondsSinceEpoch)
                timers.goesOff[kind.rawValue] = SystemClock.monotonicNow() + UInt64(delay.nanoseconds)
            }
        } catch {
            // Only for arguments the kernel refuses, which these are not; said in case.
            log.error("cannot set the \(kind) timer: \(error)")
        }
    }

    private func clockTimer(_ kind: DeadlineQueue.ClockKind) -> ClockTimer {
        if let made = timers.clocks[kind.rawValue] { return made }
        let made: ClockTimer
        do {
            let timer = try TimerDescriptor(clock: kind == .mono ? .monotonic : .realtime)
            // Urgent: the loop's gathered work (log lines, events, records) waits for a wake that starts no
            // command, so a fire's child does not wait behind it (docs/performance.md, round 12).
            let watch = try IOWatcher.shared.watch(timer.fd, for: .readable, urgent: true, on: queue) { [unowned self] _ in
                self.assumeIsolated { registry in
                    // Not gone off when it was set again after it went off: nothing to do.
                    guard (try? timer.acknowledge()) != false else { return }
                    registry.timerFired(kind)
                }
            }
            made = ClockTimer(timer: timer, watch: watch)
        } catch {
            // At the first deadline, early in the start, with descriptors to spare: as for the watcher's
            // own epoll instance, nothing could fire without it.
            fatalError("cannot make the \(kind) timer: \(error)")
        }
        timers.clocks[kind.rawValue] = made
        return made
    }

    /// Delivers what is due on either clock by now, as the timers would when they go off. For the start
    /// of a long turn of other work (a burst of requests from many connections queues a turn per
    /// connection on the registry's queue, and a timer's handler waits behind all of them): a job due
    /// meanwhile then waits for one turn at most, not for the whole queue.
    func deliverDue() {
        guard !timers.delivering else { return }
        let now = clock.now()
        for kind in DeadlineQueue.ClockKind.allCases {
            let at = kind == .mono ? Int64(clamping: now.mono.nanosecondsSinceBoot) : now.wall.nanosecondsSinceEpoch
            if let wake = timers.queue.wake(kind), wake.earliest <= at { timerFired(kind) }
        }
    }

    /// `kind`'s timer went off: every job due on that clock by now gets `deadlineReached`, earliest first,
    /// then both timers are set for what is left (the deliveries armed the jobs' next deadlines). A job
    /// is never delivered before its deadline: a timer that went off early delivers nothing.
    private func timerFired(_ kind: DeadlineQueue.ClockKind) {
        timers.setFor[kind.rawValue] = nil
        let now = clock.now()
        let at = kind == .mono ? Int64(clamping: now.mono.nanosecondsSinceBoot) : now.wall.nanosecondsSinceEpoch
        timers.delivering = true
        for job in timers.queue.popDue(kind, at: at) {
            deliver(.deadlineReached(job.name, jobID: job.jobID))
        }
        timers.delivering = false
        for kind in DeadlineQueue.ClockKind.allCases { setTimer(kind) }
    }
}
