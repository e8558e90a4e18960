import Dispatch
import Testing
import TimerdSystem

@Suite struct LockedTests {
    /// Four threads contend for one lock. Every increment must count; and under `make test-tsan`, where
    /// a contended lock is handed over by the kernel, ThreadSanitizer must see the hand-overs (with a
    /// plain `Mutex` it reports the counter as a data race, and the run fails).
    @Test func contendedIncrementsAllCountAndAreNotRaces() {
        let counter = Locked<(total: Int, perThread: [Int])>((0, [0, 0, 0, 0]))
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for _ in 0..<20_000 {
                counter.withLock { state in
                    state.total += 1
                    state.perThread[thread] += 1
                }
            }
        }
        let (total, perThread) = counter.withLock { ($0.total, $0.perThread) }
        #expect(total == 80_000)
        #expect(perThread == [20_000, 20_000, 20_000, 20_000])
    }
}
