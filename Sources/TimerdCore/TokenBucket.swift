/// A token bucket: up to `capacity` events at once, refilled at `perSecond` tokens per second. Used for a
/// connection's request rate and a user's runs per minute. Time is passed in (a monotonic instant), so
/// it is tested without a clock.
public struct TokenBucket: Sendable, Equatable {
    public let capacity: Double
    public let perSecond: Double
    private var tokens: Double
    private var last: MonoInstant

    public init(capacity: Int, perSecond: Double, now: MonoInstant) {
        self.capacity = Double(max(capacity, 0))
        self.perSecond = perSecond
        self.tokens = self.capacity
        self.last = now
    }

    /// Takes one token if there is one; false means the event is over the limit.
    public mutating func take(now: MonoInstant) -> Bool {
        if now > last {
            tokens = min(capacity, tokens + Double((now - last).nanoseconds) / 1e9 * perSecond)
            last = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
