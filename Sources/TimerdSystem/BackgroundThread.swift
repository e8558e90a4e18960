import Dispatch
import Glibc

/// One thread of its own, started on first use, for long work that must not delay a fire: describing
/// 100,000 jobs for `LIST`, writing their metrics. Work runs in the order it was given, one item at a time, and before each item
/// the thread keeps clear of the daemon's next fire (`Clearance`): on two CPUs a fire that came while
/// this work, the socket it feeds and the client reading it held both found its thread waiting for a CPU
/// (docs/performance.md, "LIST (round 14)"). Idle, the thread sleeps in the kernel: no wake-ups.
public final class BackgroundThread: Sendable {
    /// When to stand aside: an item does not start while the next fire (`next`, an instant on
    /// `CLOCK_MONOTONIC` in nanoseconds, `UInt64.max` for none) is less than `before` away, but waits
    /// until `after` past it. The thread stands aside for no longer than it has not (up to `saved` saved
    /// up), so however often fires come the work takes at most twice as long.
    public struct Clearance: Sendable {
        public var next: @Sendable () -> UInt64
        public var before: UInt64
        public var after: UInt64
        public var saved: UInt64

        public init(before: Duration, after: Duration, saved: Duration, next: @escaping @Sendable () -> UInt64) {
            self.next = next
            self.before = before.wholeNanoseconds
            self.after = after.wholeNanoseconds
            self.saved = saved.wholeNanoseconds
        }
    }

    private let core: Core

    public init(clearance: Clearance?) {
        core = Core(clearance: clearance)
    }

    /// The thread ends once the work given to it is done.
    deinit { core.stop() }

    /// Runs `body` on the thread, after the work given before it.
    public func async(_ body: @escaping @Sendable () -> Void) { core.add(body) }

    /// `body`'s result, computed on the thread.
    public func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            core.add { continuation.resume(returning: body()) }
        }
    }

    /// For long work running on the thread, now and then (between slices of it): waits while the next
    /// fire is near, as the thread does between items. Only from work on this thread.
    public func standAside() { core.standAside() }

    /// What the thread shares with its owner; the thread holds this, not the owner, so the owner can go.
    private final class Core: Sendable {
        private struct State {
            var work: [@Sendable () -> Void] = []
            var started = false
            var stopping = false
        }

        /// How long the thread may still stand aside (nanoseconds), and since when it has not.
        private struct Pacing {
            var credit: UInt64
            var since: UInt64
        }

        private let state = Locked(State())
        private let available = DispatchSemaphore(value: 0)
        private let clearance: Clearance?
        private let pacing: Locked<Pacing>
        private let fallback = DispatchQueue(label: "timerd.background")

        init(clearance: Clearance?) {
            self.clearance = clearance
            pacing = Locked(Pacing(credit: clearance?.saved ?? 0, since: SystemClock.monotonicNow()))
        }

        func add(_ work: @escaping @Sendable () -> Void) {
            let start = state.withLock { state in
                state.work.append(work)
                defer { state.started = true }
                return !state.started
            }
            if start { startThread() }
            available.signal()
        }

        func stop() {
            state.withLock { $0.stopping = true }
            available.signal()
        }

        private func startThread() {
            do {
                try CurrentProcess.detachThread { [self] in
                    while true {
                        available.wait()
                        guard let work = next() else {
                            if state.withLock({ $0.stopping && $0.work.isEmpty }) { return }
                            continue
                        }
                        standAside()
                        work()
                    }
                }
            } catch {
                // No thread to be had (the process's or the user's limit): this work runs on a Dispatch
                // queue, without standing aside between items, and the next work tries for a thread again.
                state.withLock { $0.started = false }
                fallback.async { [self] in
                    while let work = next() { work() }
                }
            }
        }

        /// The oldest work not yet run (nil when a fallback drain took it).
        private func next() -> (@Sendable () -> Void)? {
            state.withLock { $0.work.isEmpty ? nil : $0.work.removeFirst() }
        }

        /// Waits while the next fire is near, for no longer than the time since the last wait (up to
        /// `saved` in all).
        func standAside() {
            guard let clearance else { return }
            let credit = pacing.withLock { pacing in
                let now = SystemClock.monotonicNow()
                pacing.credit = min(clearance.saved, pacing.credit + (now - pacing.since))
                pacing.since = now
                return pacing.credit
            }
            let waited = keepClear(for: credit)
            pacing.withLock { pacing in
                // A wait may oversleep its end a little.
                pacing.credit -= min(pacing.credit, waited)
                pacing.since = SystemClock.monotonicNow()
            }
        }

        /// Waits while the next fire is near (`Clearance`), for at most `credit` nanoseconds; how long it
        /// waited.
        private func keepClear(for credit: UInt64) -> UInt64 {
            guard let clearance else { return 0 }
            let start = SystemClock.monotonicNow()
            let end = start + credit
            while true {
                let now = SystemClock.monotonicNow()
                let due = clearance.next()
                guard due != .max, due < now + clearance.before, now < end else { return now - start }
                // Past its instant and not set again yet: the fire is being handled; look again shortly.
                let until = min(end, max(due + clearance.after, now + 100_000))
                var pause = timespec(tv_sec: Int(until - now) / 1_000_000_000, tv_nsec: Int(until - now) % 1_000_000_000)
                var left = timespec()
                while nanosleep(&pause, &left) == -1 && errno == EINTR { pause = left }
            }
        }
    }
}

private extension Duration {
    /// The duration in whole nanoseconds (negative durations count as zero).
    var wholeNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
