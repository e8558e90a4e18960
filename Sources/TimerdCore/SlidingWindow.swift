/// Recent samples (e.g. fire lateness in nanoseconds) over a time span, with percentiles for `STATS`.
///
/// A ring buffer of at most `capacity` samples; samples older than `span` (by the monotonic time given
/// when recording) are left out of summaries. No I/O, no clock of its own: callers pass the time.
public struct SlidingWindow: Sendable {
    public struct Summary: Equatable, Sendable {
        public var count: Int
        public var p50: Int64?
        public var p90: Int64?
        public var p99: Int64?
        public var max: Int64?
    }

    public let span: Duration
    public let capacity: Int
    private var times: [MonoInstant] = []
    private var values: [Int64] = []
    private var next = 0

    public init(span: Duration, capacity: Int) {
        precondition(capacity > 0)
        self.span = span
        self.capacity = capacity
    }

    /// Records `value` taken at `time`.
    public mutating func record(_ value: Int64, at time: MonoInstant) {
        if values.count < capacity {
            times.append(time)
            values.append(value)
        } else {
            times[next] = time
            values[next] = value
            next = (next + 1) % capacity
        }
    }

    /// Percentiles (nearest rank) of the samples taken within `span` before `now`.
    public func summary(now: MonoInstant) -> Summary {
        let horizon = now - span
        var recent: [Int64] = []
        recent.reserveCapacity(values.count)
        for index in values.indices where times[index] >= horizon { recent.append(values[index]) }
        guard !recent.isEmpty else { return Summary(count: 0) }
        recent.sort()
        func rank(_ percent: Int) -> Int64 {
            // Nearest-rank: the smallest value with at least `percent`% of samples at or below it.
            let position = (percent * recent.count + 99) / 100
            return recent[Swift.max(0, Swift.min(recent.count - 1, position - 1))]
        }
        return Summary(count: recent.count, p50: rank(50), p90: rank(90), p99: rank(99), max: recent.last)
    }
}
