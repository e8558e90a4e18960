import Testing
import TimerdCore
import TimerdEngine
@testable import TimerdDaemon

/// A class, so that expectations can call the queue's mutating methods.
@Suite final class DeadlineQueueTests {
    static func name(_ text: String) -> JobName { try! JobName(text) }
    static func mono(_ nanoseconds: UInt64) -> Deadline { .mono(MonoInstant(nanosecondsSinceBoot: nanoseconds)) }
    static func wall(_ nanoseconds: Int64) -> Deadline { .wall(WallTime(nanosecondsSinceEpoch: nanoseconds)) }

    var queue = DeadlineQueue()

    func arm(_ job: String, id: UInt64, _ deadline: Deadline, leeway: Int64 = 0) {
        queue.arm(Self.name(job), jobID: id, deadline, leeway: .nanoseconds(leeway))
    }

    func due(_ clock: DeadlineQueue.ClockKind, at now: Int64) -> [String] {
        queue.popDue(clock, at: now).map { "\($0.name)/\($0.jobID)" }
    }

    @Test func deliversInDeadlineOrderAndNeverEarly() {
        arm("c", id: 3, Self.mono(300))
        arm("a", id: 1, Self.mono(100))
        arm("b", id: 2, Self.mono(200))
        #expect(queue.wake(.mono) == DeadlineQueue.Wake(earliest: 100, latest: 100))
        #expect(due(.mono, at: 99) == [])
        #expect(due(.mono, at: 250) == ["a/1", "b/2"])
        #expect(queue.wake(.mono)?.earliest == 300)
        #expect(due(.mono, at: 1_000) == ["c/3"])
        #expect(queue.wake(.mono) == nil)
        #expect(queue.count == 0)
    }

    @Test func sameDeadlineComesOutInTheOrderArmed() {
        for (index, job) in ["x", "m", "a", "q"].enumerated() { arm(job, id: UInt64(index + 1), Self.mono(500)) }
        #expect(due(.mono, at: 500) == ["x/1", "m/2", "a/3", "q/4"])
    }

    @Test func disarmedJobsAreNotDelivered() {
        arm("a", id: 1, Self.mono(100))
        arm("b", id: 2, Self.mono(200))
        let disarmed = queue.disarm(jobID: 1)
        let again = queue.disarm(jobID: 1)
        #expect(disarmed && !again)
        #expect(!queue.isArmed(jobID: 1))
        #expect(queue.wake(.mono)?.earliest == 200, "the stale first entry is dropped")
        #expect(due(.mono, at: 1_000) == ["b/2"])
    }

    @Test func reArmingEarlierOrLaterKeepsOnlyTheNewDeadline() {
        arm("a", id: 1, Self.mono(500))
        arm("b", id: 2, Self.mono(300))
        arm("a", id: 1, Self.mono(100))
        #expect(queue.wake(.mono)?.earliest == 100)
        arm("a", id: 1, Self.mono(900))
        #expect(queue.wake(.mono)?.earliest == 300)
        #expect(due(.mono, at: 600) == ["b/2"])
        #expect(due(.mono, at: 1_000) == ["a/1"])
        #expect(queue.count == 0)
    }

    @Test func reArmingAtTheSameDeadlineDeliversOnce() {
        arm("a", id: 1, Self.mono(100))
        arm("a", id: 1, Self.mono(100))
        #expect(due(.mono, at: 100) == ["a/1"])
    }

    @Test func aJobMovesBetweenClocks() {
        arm("a", id: 1, Self.wall(1_000))
        arm("a", id: 1, Self.mono(50))
        #expect(queue.wake(.wall) == nil)
        #expect(due(.wall, at: 5_000) == [])
        arm("a", id: 1, Self.wall(2_000))
        #expect(due(.mono, at: 5_000) == [])
        #expect(due(.wall, at: 2_000) == ["a/1"])
    }

    @Test func wallAndMonoAreSeparateLines() {
        arm("w", id: 1, Self.wall(1_700_000_000_000_000_000))
        arm("m", id: 2, Self.mono(5_000))
        #expect(queue.wake(.mono)?.earliest == 5_000)
        #expect(queue.wake(.wall)?.earliest == 1_700_000_000_000_000_000)
        #expect(due(.mono, at: 1_700_000_000_000_000_000) == ["m/2"])
        #expect(due(.wall, at: 1_700_000_000_000_000_000) == ["w/1"])
    }

    @Test func theWindowKeepsEveryDueJobWithinItsLeeway() {
        // a: due at 100, may be 50 late; b: due at 120, may not be late; c: due at 200, outside a's window.
        arm("a", id: 1, Self.mono(100), leeway: 50)
        arm("b", id: 2, Self.mono(120))
        arm("c", id: 3, Self.mono(200), leeway: 1_000)
        #expect(queue.wake(.mono) == DeadlineQueue.Wake(earliest: 100, latest: 120))
        // Without b, a's own window.
        queue.disarm(jobID: 2)
        #expect(queue.wake(.mono) == DeadlineQueue.Wake(earliest: 100, latest: 150))
        // A job due inside the window with a window ending later changes nothing.
        arm("d", id: 4, Self.mono(110), leeway: 100)
        #expect(queue.wake(.mono) == DeadlineQueue.Wake(earliest: 100, latest: 150))
        // One with no leeway: strict from its deadline.
        arm("e", id: 5, Self.mono(100))
        #expect(queue.wake(.mono) == DeadlineQueue.Wake(earliest: 100, latest: 100))
    }

    @Test func aCrowdDueTogetherIsWokenForAtItsFirstDeadline() {
        for index in 0..<(DeadlineQueue.windowScanLimit * 4) {
            arm("j\(index)", id: UInt64(index + 1), Self.mono(1_000 + UInt64(index)), leeway: 1_000_000)
        }
        let wake = queue.wake(.mono)!
        #expect(wake.earliest == 1_000)
        // It looks at the first `windowScanLimit` and wakes no later than the next one's deadline.
        #expect(wake.latest == 1_000 + Int64(DeadlineQueue.windowScanLimit))
    }

    @Test func leewayNearTheEndOfTimeSaturates() {
        arm("a", id: 1, Self.wall(.max - 10), leeway: 1_000)
        #expect(queue.wake(.wall) == DeadlineQueue.Wake(earliest: .max - 10, latest: .max))
        arm("b", id: 2, .mono(MonoInstant(nanosecondsSinceBoot: .max)))
        #expect(queue.wake(.mono)?.earliest == .max)
    }

    @Test func manyCancelledJobsGiveTheirEntriesBack() {
        let jobs = 10_000
        for index in 0..<jobs { arm("j\(index)", id: UInt64(index + 1), Self.mono(UInt64(1_000 + index))) }
        for index in 0..<(jobs - 10) { queue.disarm(jobID: UInt64(index + 1)) }
        #expect(queue.count == 10)
        #expect(queue.entryCount(.mono) == 10, "a disarmed job's entry goes with it")
        #expect(queue.entryCapacity(.mono) < 4_096, "the room it had is given back (it had 16,384)")
        #expect(due(.mono, at: .max) == (jobs - 10..<jobs).map { "j\($0)/\($0 + 1)" })
        #expect(queue.entryCount(.mono) == 0)
    }

    @Test func randomOperationsMatchASimpleModel() {
        var model: [UInt64: (at: Int64, order: Int)] = [:]
        var random = SplitMix64(seed: 19)
        var order = 0
        var now: Int64 = 0
        for _ in 0..<20_000 {
            let id = random.next() % 200 + 1
            switch random.next() % 4 {
            case 0, 1:
                let at = now + Int64(random.next() % 1_000)
                arm("j\(id)", id: id, Self.mono(UInt64(at)))
                order += 1
                model[id] = (at, order)
            case 2:
                #expect(queue.disarm(jobID: id) == (model.removeValue(forKey: id) != nil))
            default:
                now += Int64(random.next() % 300)
                let expected = model.filter { $0.value.at <= now }.sorted { ($0.value.at, $0.value.order) < ($1.value.at, $1.value.order) }
                #expect(due(.mono, at: now) == expected.map { "j\($0.key)/\($0.key)" })
                for (id, _) in expected { model[id] = nil }
                #expect(queue.wake(.mono)?.earliest == model.values.map(\.at).min())
            }
            #expect(queue.count == model.count)
        }
    }
}
