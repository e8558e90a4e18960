import Testing
@testable import TimerdCore

@Suite("SlidingWindow")
struct SlidingWindowTests {
    @Test("nearest-rank percentiles of 1…100")
    func percentiles() {
        var window = SlidingWindow(span: .seconds(10), capacity: 1_000)
        for value in (1...100).shuffled() { window.record(Int64(value), at: MonoInstant(nanosecondsSinceBoot: 5_000_000_000)) }
        let summary = window.summary(now: MonoInstant(nanosecondsSinceBoot: 6_000_000_000))
        #expect(summary == SlidingWindow.Summary(count: 100, p50: 50, p90: 90, p99: 99, max: 100))
    }

    @Test("samples older than the span are left out, and capacity bounds memory")
    func windowAndCapacity() {
        var window = SlidingWindow(span: .seconds(1), capacity: 3)
        window.record(1_000, at: MonoInstant(nanosecondsSinceBoot: 0))
        window.record(2_000, at: MonoInstant(nanosecondsSinceBoot: 1_500_000_000))
        #expect(window.summary(now: MonoInstant(nanosecondsSinceBoot: 2_000_000_000)) == SlidingWindow.Summary(count: 1, p50: 2_000, p90: 2_000, p99: 2_000, max: 2_000))
        for value in [7, 8, 9, 10] as [Int64] { window.record(value, at: MonoInstant(nanosecondsSinceBoot: 2_000_000_000)) }
        #expect(window.summary(now: MonoInstant(nanosecondsSinceBoot: 2_000_000_000)).count == 3, "the oldest samples were overwritten")
        #expect(window.summary(now: MonoInstant(nanosecondsSinceBoot: 2_000_000_000)).max == 10)
        #expect(window.summary(now: MonoInstant(nanosecondsSinceBoot: 10_000_000_000)) == SlidingWindow.Summary(count: 0))
    }
}
