import Dispatch
import Testing
@testable import TimerdDaemon

/// `Gathering`: an item after a quiet spell is taken at once, items close behind the last take wait for
/// the next one, `window` after it, and one take is scheduled at a time.
@Suite struct GatheringTests {
    let ms: UInt64 = 1_000_000

    @Test func aLoneItemIsTakenAtOnce() {
        var gathering = Gathering()
        let now: UInt64 = 5_000 * ms
        #expect(gathering.arrived(now: now) == DispatchTime(uptimeNanoseconds: now))
        #expect(gathering.scheduled)
    }

    @Test func oneTakeIsScheduledAtATime() {
        var gathering = Gathering()
        #expect(gathering.arrived(now: 1_000 * ms) != nil)
        #expect(gathering.arrived(now: 1_001 * ms) == nil)
        #expect(gathering.arrived(now: 1_050 * ms) == nil)
    }

    @Test func itemsCloseBehindATakeWaitForTheWindow() {
        var gathering = Gathering()
        _ = gathering.arrived(now: 1_000 * ms)
        gathering.taking(now: 1_000 * ms)
        // 5 ms after the take: waits until 20 ms after it.
        #expect(gathering.arrived(now: 1_005 * ms) == DispatchTime(uptimeNanoseconds: 1_000 * ms + Gathering.window))
        gathering.taking(now: 1_020 * ms)
        // A quiet spell longer than the window: at once again.
        #expect(gathering.arrived(now: 1_100 * ms) == DispatchTime(uptimeNanoseconds: 1_100 * ms))
    }

    @Test func scheduleRunsTheTakeOnTheQueue() async {
        let queue = DispatchQueue(label: "gathering-test")
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Gathering.schedule(at: DispatchTime.now(), on: queue) {
                dispatchPrecondition(condition: .onQueue(queue))
                done.resume()
            }
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Gathering.schedule(at: DispatchTime.now() + .milliseconds(5), on: queue) { done.resume() }
        }
    }
}
