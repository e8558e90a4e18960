import Dispatch
import Glibc
import Testing
import TimerdSystem

/// `BackgroundThread`: one thread of its own that runs work in order, stands aside for a fire that is
/// near, never for longer than it has worked, and ends with its owner.
@Suite(.timeLimit(.minutes(1))) struct BackgroundThreadTests {
    @Test func workRunsInOrderOnOneThreadOfItsOwn() async {
        let thread = BackgroundThread(clearance: nil)
        let seen = Shared<[(index: Int, thread: String)]>([])
        for index in 0..<100 {
            thread.async { let thread = Self.threadDirectory()
                seen.lock.withLock { $0.append((index, thread)) } }
        }
        let last = await thread.run { Self.threadDirectory() }
        let all = seen.lock.withLock { $0 }
        #expect(all.map(\.index) == Array(0..<100))
        #expect(Set(all.map(\.thread)) == [last])
        #expect(last != Self.threadDirectory())
    }

    /// Due 10 ms from now, within `before`: the work starts no sooner than `after` past it (when, as the
    /// registry's would be, the next fire is set again: for none).
    @Test func workWaitsUntilPastAFireThatIsNear() async {
        let due = SystemClock.monotonicNow() + 10_000_000
        let thread = BackgroundThread(clearance: .init(before: .milliseconds(50), after: .milliseconds(20), saved: .seconds(10)) {
            SystemClock.monotonicNow() < due + 20_000_000 ? due : .max
        })
        let started = await thread.run { SystemClock.monotonicNow() }
        #expect(started >= due + 20_000_000)
    }

    /// Long work that stands aside between its slices waits there, as the thread does between items.
    @Test func standingAsideInsideWorkWaitsUntilPastAFireThatIsNear() async {
        let due = Shared(UInt64.max)
        let thread = BackgroundThread(clearance: .init(before: .milliseconds(50), after: .milliseconds(20), saved: .seconds(10)) {
            let at = due.lock.withLock { $0 }
            return at != .max && SystemClock.monotonicNow() >= at + 20_000_000 ? .max : at
        })
        let (fire, resumed) = await thread.run {
            // The first slice done, a fire comes due 10 ms from now.
            let fire = SystemClock.monotonicNow() + 10_000_000
            due.lock.withLock { $0 = fire }
            thread.standAside()
            return (fire, SystemClock.monotonicNow())
        }
        #expect(resumed >= fire + 20_000_000)
    }

    /// Due in 10 s, beyond `before`: the work does not wait for it (it would be 10 s late if it did).
    @Test func aFireFarAwayHoldsNothingBack() async {
        let due = SystemClock.monotonicNow() + 10_000_000_000
        let thread = BackgroundThread(clearance: .init(before: .milliseconds(1), after: .milliseconds(1), saved: .seconds(60)) { due })
        let started = await thread.run { SystemClock.monotonicNow() }
        #expect(started < due)
    }

    /// A fire always near (one due now, still being handled): the work goes on, standing aside no longer
    /// than it worked; with a credit of a microsecond every wait oversleeps its end, which must not
    /// count as more than the credit. Without the limit the work would never start (the time limit).
    @Test func aFireAlwaysNearHoldsTheWorkBackNoLongerThanItWorks() async {
        for saved in [Duration.milliseconds(2), .nanoseconds(1_000)] {
            let thread = BackgroundThread(clearance: .init(before: .milliseconds(5), after: .milliseconds(5), saved: saved) {
                SystemClock.monotonicNow()
            })
            let ran = Shared(0)
            for _ in 0..<50 {
                thread.async {
                    let end = SystemClock.monotonicNow() + 100_000
                    while SystemClock.monotonicNow() < end {}
                    ran.lock.withLock { $0 += 1 }
                }
            }
            await thread.run {}
            #expect(ran.lock.withLock { $0 } == 50)
        }
    }

    /// Its owner gone, the thread ends once its work is done.
    @Test func theThreadEndsWithItsOwner() async throws {
        var thread: BackgroundThread? = BackgroundThread(clearance: nil)
        let directory = await thread!.run { Self.threadDirectory() }
        #expect(FileSystem.isDirectory(directory))
        thread = nil
        // Synchronised on the thread's directory going away; the suite's time limit ends a wait for good.
        while FileSystem.isDirectory(directory) { try await Task.sleep(for: .milliseconds(5)) }
    }

    /// The calling thread's `/proc/PID/task/TID`.
    static func threadDirectory() -> String { (try? FileSystem.realPath("/proc/thread-self")) ?? "?" }
}

/// A value the test and the thread both reach.
private final class Shared<Value: Sendable>: Sendable {
    let lock: Locked<Value>
    init(_ value: Value) { lock = Locked(value) }
}
