import Dispatch
import Glibc
import Synchronization
import Testing
import TimerdSystem
import TimerdTestSupport

@Suite struct IOWatcherTests {
    /// What the two handlers saw, shared with them.
    private final class Runs: Sendable {
        struct Counts {
            var busy = 0
            /// The busy handler's run count when the quiet one ran.
            var busyWhenQuietRan: Int?
        }
        let counts = Mutex(Counts())
        let busyWatch = Mutex<IOWatcher.Registration?>(nil)
        let checksum = Atomic<Int>(0)
    }

    /// A descriptor that stays readable, whose handler reads a little and updates its interest each time (as
    /// a control connection does), gets one handler run at a time: another registration on the same queue
    /// runs right after the run during which it became ready. (It used to be armed twice per run, so the
    /// busy one's queued runs grew by one each time, ahead of everyone else.)
    @Test func aBusyDescriptorDoesNotCrowdOutOthersOnItsQueue() throws {
        let watcher = IOWatcher.shared
        let queue = DispatchQueue(label: "timerd.test.iowatcher")
        let busy = try FileDescriptor.makePipe(nonBlockingRead: true)
        let quiet = try FileDescriptor.makePipe(nonBlockingRead: true)
        defer { for fd in [busy.read, busy.write, quiet.read, quiet.write] { try? fd.close() } }
        try busy.write.writeAll(String(repeating: "x", count: 60_000))
        let runs = Runs()
        let quietRan = DispatchSemaphore(value: 0)
        let becomesReady = 200
        let work = [Int](0..<20_000)

        let quietWatch = try queue.sync { () throws(Errno) -> IOWatcher.Registration in
            let registration = try watcher.watch(busy.read, for: .readable, on: queue) { _ in
                let (count, quietDone) = runs.counts.withLock { counts in
                    counts.busy += 1
                    return (counts.busy, counts.busyWhenQuietRan != nil)
                }
                if count == becomesReady { try? quiet.write.writeAll("!") }
                if let me = runs.busyWatch.withLock({ $0 }) { watcher.update(me, to: quietDone ? [] : .readable) }
                // Then the work on what it read, as a connection frames a chunk after saying what it waits for.
                let chunk = (try? busy.read.tryRead(upToCount: 8)) ?? nil
                runs.checksum.add(work.reduce(chunk?.count ?? 0, &+), ordering: .relaxed)
            }
            runs.busyWatch.withLock { $0 = registration }
            return try watcher.watch(quiet.read, for: .readable, on: queue) { _ in
                _ = try? quiet.read.tryRead(upToCount: 16)
                runs.counts.withLock { $0.busyWhenQuietRan = $0.busy }
                quietRan.signal()
            }
        }
        #expect(quietRan.wait(timeout: .now() + 20) == .success, "the quiet descriptor's handler never ran")
        queue.sync {
            watcher.cancel(quietWatch)
            if let busyWatch = runs.busyWatch.withLock({ $0 }) { watcher.cancel(busyWatch) }
            // The busy handler holds `runs`, which holds the busy registration: break the cycle.
            runs.busyWatch.withLock { $0 = nil }
        }
        let seen = try #require(runs.counts.withLock { $0.busyWhenQuietRan })
        #expect(seen - becomesReady <= 2, "the busy handler ran \(seen - becomesReady) more times before the quiet one")
    }

    /// timerd runs the loop on its main thread, which then also runs what queues targeting the main queue
    /// hold: a descriptor's handler, work `after` a deadline, and work another thread queues all run on the
    /// main thread (no other thread woken for them), and `after` waits for its deadline. In
    /// timerd-test-helper: this process's main thread belongs to the test runner.
    @Test func theLoopOnTheMainThreadRunsTheMainQueuesWork() throws {
        let result = try run(TestBinaries.helper(), ["main-loop"])
        #expect(result.status.isSuccess, "\(result.output)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(lines)")
        #expect(lines.first == "after other", "\(lines)")
        #expect(lines.contains("readable main"), "\(lines)")
        #expect(lines.contains("async main"), "\(lines)")
        let after = try #require(lines.first { $0.hasPrefix("after main ") }, "\(lines)")
        let elapsed = try #require(Int(after.dropFirst("after main ".count)))
        #expect(elapsed >= 50, "work after 50 ms ran after \(elapsed) ms")
    }

    /// What the handlers and work of a test recorded, in the order they ran.
    private final class Recorded<Value: Sendable>: Sendable {
        let values = Mutex<[Value]>([])
        func note(_ value: Value) { values.withLock { $0.append(value) } }
    }

    /// Work `after` a deadline with a leeway runs when the loop next wakes for anything once the deadline
    /// has passed (here a descriptor's event), not at the end of its leeway, and never before its deadline;
    /// with nothing else to wake the loop it still runs, by the end of its leeway.
    @Test func workAfterADeadlineRunsAtTheNextWakeWithinItsLeeway() throws {
        let watcher = try IOWatcher()  // a loop of its own: no other test's events wake it
        let queue = DispatchQueue(label: "timerd.test.after")
        let pipe = try FileDescriptor.makePipe(nonBlockingRead: true)
        defer { try? pipe.read.close(); try? pipe.write.close() }
        let start = DispatchTime.now()
        @Sendable func milliseconds(since instant: DispatchTime) -> UInt64 {
            (DispatchTime.now().uptimeNanoseconds - instant.uptimeNanoseconds) / 1_000_000
        }
        let ranAt = Recorded<UInt64>()  // when each piece of work ran, in ms from its own start
        let readable = DispatchSemaphore(value: 0)
        let registration = try watcher.watch(pipe.read, for: .readable, on: queue) { _ in
            _ = try? pipe.read.tryRead(upToCount: 16)
            readable.signal()
        }
        defer { queue.sync { watcher.cancel(registration) } }

        // Deadline 20 ms, leeway 60 s: it runs at the pipe's event once the deadline is past.
        let ran = DispatchSemaphore(value: 0)
        watcher.after(start + .milliseconds(20), leeway: .seconds(60), on: queue) {
            ranAt.values.withLock { $0.append(milliseconds(since: start)) }
            ran.signal()
        }
        // The pipe's event once 30 ms have passed, which the loop takes when it comes.
        DispatchQueue.global().asyncAfter(deadline: start + .milliseconds(30)) { try? pipe.write.writeAll("x") }
        #expect(readable.wait(timeout: .now() + 10) == .success, "the pipe's event never came")
        #expect(ran.wait(timeout: .now() + 10) == .success, "the work waited for the end of its leeway")
        let first = try #require(ranAt.values.withLock { $0.first })
        #expect(first >= 20, "ran after \(first) ms, before its 20 ms deadline")

        // Nothing else wakes the loop: it runs by its deadline plus leeway (10 + 40 ms), not before 10 ms.
        let again = DispatchTime.now()
        watcher.after(again + .milliseconds(10), leeway: .milliseconds(40), on: queue) {
            ranAt.values.withLock { $0.append(milliseconds(since: again)) }
            ran.signal()
        }
        #expect(ran.wait(timeout: .now() + 10) == .success, "the work never ran")
        let second = try #require(ranAt.values.withLock { $0.count == 2 ? $0[1] : nil })
        #expect(second >= 10, "ran after \(second) ms, before its 10 ms deadline")
    }

    /// A wake for an urgent descriptor (the registry's clock timers: a fire, whose child waits for what the
    /// loop's thread does next) does not run work within its leeway: that waits for the next other wake.
    /// Handlers and work share one serial queue, so the order they ran in is the order the loop handed
    /// them out: work taken at the urgent wake would come before the other descriptor's handler.
    @Test func anUrgentDescriptorsWakeLeavesWorkWithinItsLeewayToTheNextOtherWake() throws {
        let watcher = try IOWatcher()  // a loop of its own: no other test's events wake it
        let queue = DispatchQueue(label: "timerd.test.urgent")
        let urgentPipe = try FileDescriptor.makePipe(nonBlockingRead: true)
        let otherPipe = try FileDescriptor.makePipe(nonBlockingRead: true)
        defer { for fd in [urgentPipe.read, urgentPipe.write, otherPipe.read, otherPipe.write] { try? fd.close() } }
        let order = Recorded<String>()
        let urgentRan = DispatchSemaphore(value: 0)
        let otherRan = DispatchSemaphore(value: 0)
        let workRan = DispatchSemaphore(value: 0)
        let urgent = try watcher.watch(urgentPipe.read, for: .readable, urgent: true, on: queue) { _ in
            _ = try? urgentPipe.read.tryRead(upToCount: 16)
            order.note("urgent")
            urgentRan.signal()
        }
        let other = try watcher.watch(otherPipe.read, for: .readable, on: queue) { _ in
            _ = try? otherPipe.read.tryRead(upToCount: 16)
            order.note("other")
            otherRan.signal()
        }
        defer { queue.sync { watcher.cancel(urgent); watcher.cancel(other) } }

        // Deadline 10 ms, leeway 60 s; the urgent descriptor's event at 20 ms, past the deadline.
        let start = DispatchTime.now()
        watcher.after(start + .milliseconds(10), leeway: .seconds(60), on: queue) {
            order.note("work")
            workRan.signal()
        }
        DispatchQueue.global().asyncAfter(deadline: start + .milliseconds(20)) { try? urgentPipe.write.writeAll("x") }
        #expect(urgentRan.wait(timeout: .now() + 10) == .success, "the urgent descriptor's event never came")
        try otherPipe.write.writeAll("x")
        #expect(otherRan.wait(timeout: .now() + 10) == .success, "the other descriptor's event never came")
        #expect(workRan.wait(timeout: .now() + 10) == .success, "the work did not run at the other descriptor's wake")
        #expect(order.values.withLock { $0 } == ["urgent", "other", "work"])
    }
}
