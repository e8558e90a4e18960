import Testing
import TimerdCore

@Suite struct TokenBucketTests {
    static let second: UInt64 = 1_000_000_000

    /// Takes a token at each of `times` (ns) and returns which takes succeeded.
    static func takes(_ bucket: inout TokenBucket, at times: [UInt64]) -> [Bool] {
        times.map { bucket.take(now: MonoInstant(nanosecondsSinceBoot: $0)) }
    }

    @Test func aFullBucketAllowsABurstThenRefillsAtItsRate() {
        var bucket = TokenBucket(capacity: 3, perSecond: 2, now: .zero)
        let s = Self.second
        // A burst of 3, nothing at half a token, one after 0.5 s at 2/s.
        let burst = Self.takes(&bucket, at: [0, 0, 0, 0, s / 4, s / 2, s / 2])
        #expect(burst == [true, true, true, false, false, true, false])
        // Never more than the capacity, however long it rested.
        let rested = Self.takes(&bucket, at: [3_600 * s, 3_600 * s, 3_600 * s, 3_600 * s])
        #expect(rested == [true, true, true, false])
    }

    @Test func perMinuteRatesAndAZeroCapacity() {
        var minute = TokenBucket(capacity: 60, perSecond: 1, now: .zero)
        let first = Self.takes(&minute, at: Array(repeating: 0, count: 61))
        #expect(first == Array(repeating: true, count: 60) + [false])
        let later = Self.takes(&minute, at: [Self.second])
        #expect(later == [true])
        var none = TokenBucket(capacity: 0, perSecond: 0, now: .zero)
        let never = Self.takes(&none, at: [0, 100 * Self.second])
        #expect(never == [false, false])
    }

    @Test func timeGoingBackwardsChangesNothing() {
        var bucket = TokenBucket(capacity: 1, perSecond: 1, now: MonoInstant(nanosecondsSinceBoot: 10 * Self.second))
        let results = Self.takes(&bucket, at: [10 * Self.second, 5 * Self.second, 11 * Self.second])
        #expect(results == [true, false, true])
    }
}
