import Dispatch
import TimerdSystem

/// When to take, on a queue, what other threads hand over one item at a time (log lines, `WATCH` events):
/// the first item after a quiet spell is taken at once, and items that arrive within `window` of the
/// last take wait for the next one, `window` after it (or up to half a window later, when the daemon's
/// loop wakes anyway). So a lone log line is written as soon as it is
/// logged, and a daemon starting 1,000 runs a second (two log lines and three events each) wakes its
/// logger and each watcher's connection at most once per window instead of once per item: each wake of
/// an idle queue is a thread hand-off, which cost more than the work it did (`docs/performance.md`).
///
/// Kept under the owner's lock with the items it schedules.
struct Gathering: Sendable {
    /// 20 ms: at most 50 takes a second however busy the daemon is.
    static let window: UInt64 = 20_000_000

    /// When the last take began (`DispatchTime.uptimeNanoseconds`).
    private var lastTake: UInt64 = 0
    /// A take is scheduled and has not begun.
    private(set) var scheduled = false

    /// An item arrived: the time to schedule a take for, or nil when one is scheduled already.
    mutating func arrived(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> DispatchTime? {
        guard !scheduled else { return nil }
        scheduled = true
        return DispatchTime(uptimeNanoseconds: max(now, lastTake &+ Self.window))
    }

    /// A take begins: items arriving from now on schedule the next one.
    mutating func taking(now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        scheduled = false
        lastTake = now
    }

    /// Runs `take` on `queue` at `time` (`arrived`'s answer), or up to half a window later: at once if that
    /// is not in the future, else from the `IOWatcher`'s loop when it next wakes (a Dispatch timer would
    /// wake libdispatch's timer thread for each).
    static func schedule(at time: DispatchTime, on queue: DispatchQueue, _ take: @escaping @Sendable () -> Void) {
        if time <= DispatchTime.now() {
            queue.async(execute: take)
        } else {
            IOWatcher.shared.after(time, leeway: .nanoseconds(window / 2), on: queue, execute: take)
        }
    }
}
